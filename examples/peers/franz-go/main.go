// franz-go peer of bench_e2e (examples/examples/bench_e2e.rs): produces --records records
// with kgo.Client.Produce(ctx, record, callback), one call per record, and prints
// "RESULT ok=N failed=N secs=S". The coordinator measures this process's CPU and peak RSS
// itself (wait4). Payloads are read from the arena files the coordinator wrote, and sliced
// the same way as for every other producer of the bench.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

const (
	valueArena = 1 << 20
	keys       = 65536
)

func main() {
	bootstrap := flag.String("bootstrap", "", "host:port,...")
	topic := flag.String("topic", "bench", "topic")
	records := flag.Int64("records", 0, "records to produce")
	valuesPath := flag.String("values", "", "value arena file")
	keysPath := flag.String("keys", "", "key arena file (keyed workloads)")
	valueBytes := flag.Int("value-bytes", 100, "bytes per value")
	batchSize := flag.Int("batch-size", 16384, "producer batch max bytes")
	idem := flag.Bool("idempotence", false, "idempotent writes")
	lz4 := flag.Bool("lz4", false, "lz4 compression")
	debug := flag.Bool("debug", false, "franz-go's debug log on stderr")
	maxKafka := flag.String("max-kafka", "", "cap the protocol versions at this Kafka release (e.g. 3.0)")
	flag.Parse()

	values, err := os.ReadFile(*valuesPath)
	if err != nil {
		fail(err)
	}
	var keyArena []byte
	if *keysPath != "" {
		if keyArena, err = os.ReadFile(*keysPath); err != nil {
			fail(err)
		}
	}

	started := time.Now()
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*bootstrap, ",")...),
		kgo.DefaultProduceTopic(*topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(*batchSize)),
		kgo.MaxBufferedRecords(1_000_000),
		kgo.MaxBufferedBytes(64 << 20),
	}
	if *lz4 {
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	} else {
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	}
	if !*idem {
		// Only without idempotence: franz-go refuses this option with it.
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5))
	}
	if *maxKafka != "" {
		v := kversion.FromString(*maxKafka)
		if v == nil {
			fail(fmt.Errorf("unknown Kafka version %q", *maxKafka))
		}
		opts = append(opts, kgo.MaxVersions(v))
	}
	if *debug {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		fail(err)
	}
	// A client that cannot talk to the cluster says so instead of retrying until killed.
	pingCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	if err := client.Ping(pingCtx); err != nil {
		fail(fmt.Errorf("cannot connect: %v", err))
	}
	cancel()
	var ok, failed atomic.Int64
	callback := func(_ *kgo.Record, err error) {
		if err != nil {
			if failed.Add(1) <= 3 {
				fmt.Fprintf(os.Stderr, "franz-go: delivery failed: %v\n", err)
			}
		} else {
			ok.Add(1)
		}
	}
	ctx := context.Background()
	for i := int64(0); i < *records; i++ {
		start := int((uint64(i) * 7919) % valueArena)
		rec := &kgo.Record{Value: values[start : start+*valueBytes]}
		if keyArena != nil {
			k := int(i%keys) * 8
			rec.Key = keyArena[k : k+8]
		}
		client.Produce(ctx, rec, callback)
	}
	if err := client.Flush(ctx); err != nil {
		fail(err)
	}
	secs := time.Since(started).Seconds()
	client.Close()
	fmt.Printf("RESULT ok=%d failed=%d secs=%.6f\n", ok.Load(), failed.Load(), secs)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "franz-go: %v\n", err)
	os.Exit(1)
}
