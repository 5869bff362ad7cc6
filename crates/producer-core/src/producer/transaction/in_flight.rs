//! A transactional request in flight: what its answer needs, kept on its connection until
//! the answer comes (a leaf the connection can name without the transaction's logic).

/// A coordinator request in flight, with what its answer needs.
#[derive(Debug)]
pub(crate) enum TxnRequest {
    /// The transaction coordinator (`group` false) or the offsets' group coordinator.
    FindCoordinator { group: bool },
    /// The producer id; `bump` when it bumps the epoch after an abort (KIP-360). `tv2` is
    /// what the coordinator's connection said of the cluster.
    InitProducerId { bump: bool, tv2: bool },
    /// TV1: these partitions join the transaction.
    AddPartitions { partitions: Vec<(u32, u32)> },
    /// The offsets' group joins the transaction.
    AddOffsets,
    /// The offsets themselves, to the group coordinator.
    TxnOffsetCommit,
    /// The end of the transaction.
    EndTxn { commit: bool },
}
