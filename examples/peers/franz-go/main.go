// franz-go peer of bench_e2e (examples/examples/bench_e2e/): produces --records records
// with kgo.Client.Produce(ctx, record, callback), one call per record, and prints
// "RESULT ok=N failed=N secs=S". The coordinator measures this process's CPU and peak RSS
// itself (wait4). Payloads are read from the arena files the coordinator wrote, and sliced
// the same way as for every other producer of the bench.
//
// With --rate N (the latency workload) the sender is open loop: after one warm-up record
// (ProduceSync, not counted) record i is due at start + i/N; the sender produces every due
// record (catching up when it fell behind) and the promise of record i takes its latency,
// from when it was due to its callback; the RESULT line adds p50_us, p99_us and p999_us.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
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
	compression := flag.String("compression", "none", "none, lz4 or zstd")
	rate := flag.Float64("rate", 0, "open loop at this many records per second (the latency workload)")
	debug := flag.Bool("debug", false, "franz-go's debug log on stderr")
	defaults := flag.Bool("defaults", false, "franz-go's shipped defaults (linger, batch max bytes, buffer limits) instead of the bench's equal settings")
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
	}
	if !*defaults {
		opts = append(opts,
			kgo.ProducerLinger(5*time.Millisecond),
			kgo.ProducerBatchMaxBytes(int32(*batchSize)),
			kgo.MaxBufferedRecords(1_000_000),
			kgo.MaxBufferedBytes(64<<20),
		)
	}
	switch *compression {
	case "none":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		fail(fmt.Errorf("unknown compression %q", *compression))
	}
	if !*idem {
		// Only without idempotence: franz-go refuses this option with it.
		opts = append(opts, kgo.DisableIdempotentWrite())
		if !*defaults {
			opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(5))
		}
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
	record := func(i int64) *kgo.Record {
		start := int((uint64(i) * 7919) % valueArena)
		rec := &kgo.Record{Value: values[start : start+*valueBytes]}
		if keyArena != nil {
			k := int(i%keys) * 8
			rec.Key = keyArena[k : k+8]
		}
		return rec
	}
	var latencies []uint32
	if *rate > 0 {
		if err := client.ProduceSync(ctx, record(0)).FirstErr(); err != nil {
			fail(fmt.Errorf("warm-up record failed: %v", err))
		}
		// Per record: 1 + its latency in µs once delivered, 0 if it failed.
		latencies = make([]uint32, *records)
		interval := 1e9 / *rate
		started = time.Now()
		for i := int64(0); i < *records; i++ {
			due := started.Add(time.Duration(float64(i) * interval))
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
			slot := &latencies[i]
			client.Produce(ctx, record(i), func(r *kgo.Record, err error) {
				if err == nil {
					us := time.Since(due).Microseconds()
					*slot = uint32(min(us, math.MaxUint32-1)) + 1
				}
				callback(r, err)
			})
		}
	} else {
		for i := int64(0); i < *records; i++ {
			client.Produce(ctx, record(i), callback)
		}
	}
	if err := client.Flush(ctx); err != nil {
		fail(err)
	}
	secs := time.Since(started).Seconds()
	client.Close()
	fmt.Printf("RESULT ok=%d failed=%d secs=%.6f%s\n", ok.Load(), failed.Load(), secs, percentiles(latencies))
}

// percentiles is " p50_us=A p99_us=B p999_us=C" (nearest rank) over the delivered records'
// latencies, or "" without any.
func percentiles(latencies []uint32) string {
	var v []uint32
	for _, l := range latencies {
		if l > 0 {
			v = append(v, l-1)
		}
	}
	if len(v) == 0 {
		return ""
	}
	sort.Slice(v, func(a, b int) bool { return v[a] < v[b] })
	rank := func(q float64) uint32 {
		r := int(math.Ceil(q * float64(len(v))))
		return v[max(1, min(r, len(v)))-1]
	}
	return fmt.Sprintf(" p50_us=%d p99_us=%d p999_us=%d", rank(0.50), rank(0.99), rank(0.999))
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "franz-go: %v\n", err)
	os.Exit(1)
}
