import MirrorKit

/// The threads a sync's transfers run on (docs/architecture.md, "Threads"), started together when
/// the transfers begin and stopped together when they end, whatever ends them:
/// - the transfer threads (``TransferPool``), each a `CURLM` handle driven by `curl_multi_poll`;
///   a file's requests all go to one of them, dealt out in turn as files start;
/// - the hashing threads (``PartialWriterPool``), one per file in flight, at most one per core;
/// - the commit thread (``CommitThread``), whose finished batch wakes the sync thread's wait on
///   the transfer threads (`curl_multi_wakeup`).
///
/// Only the sync thread holds it.
final class RunThreads {
    let transfers: TransferPool
    let writers: PartialWriterPool
    let committer: CommitThread
    /// The transfer thread the next file to start goes to.
    private var nextShard = 0
    /// What the run's requests saw of the network (``LinkSeen``), for the summary.
    private(set) var link = LinkSeen()

    init(options: SyncOptions) throws {
        let transfers = try TransferPool(policy: options.connectionPolicy, limitRate: options.limitRate)
        self.transfers = transfers
        writers = PartialWriterPool(limit: min(WorkerPool.coreCount, max(options.jobs, 1)))
        let interrupt = transfers.waitInterrupt
        committer = CommitThread { interrupt.interrupt() }
    }

    /// Hands `download` to `task`'s transfer thread, which the task takes at its first request;
    /// segment `k` of a segmented file goes `k` threads further, so its segments spread over the
    /// threads' shares of the connections (``ConnectionPolicy/connectionsPerThread``).
    func submit(_ download: Download, for task: EntryTask) {
        let shard = task.shard ?? nextShard
        if task.shard == nil {
            task.shard = shard
            nextShard += 1
        }
        link.requestStarted(at: monotonicSeconds())
        transfers.submit(download, shard: shard &+ (download.segment ?? 0))
    }

    /// Counts what a request that ended saw of the link (``Download/linkSample``).
    func ended(_ download: Download) {
        let sample = download.linkSample
        link.requestEnded(at: monotonicSeconds(), firstByteWait: sample.firstByteWait, connectionsOpened: sample.connectionsOpened)
    }

    /// The idle seconds of the transfer thread that runs `task`'s requests.
    func idleSeconds(of task: EntryTask) -> Double {
        transfers.idleSeconds(shard: task.shard ?? 0)
    }

    /// Stops every thread: the transfers first (their ended downloads are not collected), then
    /// the hashing threads, then the commit thread once its batch is done.
    func shutdown() {
        transfers.shutdown()
        writers.shutdown()
        committer.shutdown()
    }
}
