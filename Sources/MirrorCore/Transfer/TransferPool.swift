/// Several transfer threads, each a ``TransferEngine`` with its own libcurl multi handle, and
/// each file's requests on one of them (a shard of the files), so that receiving and writing the
/// bytes of many files at once uses more than one core. One thread drove every transfer before.
///
/// All engines hand finished downloads to one queue (``FinishedDownloads``), which the sync thread
/// waits on as it did on one engine. A file keeps its engine for the run, but a segmented file's
/// segments are dealt to the engines in turn from its own (``RunThreads``): each engine holds
/// only its share of the connections to a host, and each segment wants one of its own. With `--limit-rate` there is one
/// engine, because the token bucket (``RateLimiter``) belongs to one thread.
public final class TransferPool {
    private let engines: [TransferEngine]
    private let finished = FinishedDownloads()

    /// - Parameters:
    ///   - policy: the run's limits (``ConnectionPolicy``): its ``ConnectionPolicy/threads`` engines
    ///     (1 with a rate limit, a timetable included), each with its share of the connections to
    ///     one host and of the requests.
    public init(policy: ConnectionPolicy, limitRate: RateSchedule?) throws {
        var policy = policy
        if limitRate != nil { policy.threadsWanted = 1 }
        let count = policy.threads
        var engines: [TransferEngine] = []
        for i in 0 ..< count {
            engines.append(try TransferEngine(policy: policy, limitRate: limitRate, finished: finished,
                                              name: count == 1 ? "mirror-transfer" : "mirror-xfer-\(i)"))
        }
        self.engines = engines
    }

    public var threads: Int { engines.count }

    /// Queues `download` on engine `shard` (modulo the engines).
    public func submit(_ download: Download, shard: Int) {
        engines[abs(shard) % engines.count].submit(download)
    }

    /// ``TransferEngine/idleSeconds`` of the thread that runs `shard`'s requests.
    public func idleSeconds(shard: Int) -> Double {
        engines[abs(shard) % engines.count].idleSeconds
    }

    /// Each engine stops those of `downloads` it runs (it ignores the others).
    public func cancel(_ downloads: [Download]) {
        for engine in engines { engine.cancel(downloads) }
    }

    /// Each engine goes on with `download` if it runs it (``TransferEngine/acceptWholeFile(_:)``).
    public func acceptWholeFile(_ download: Download) {
        for engine in engines { engine.acceptWholeFile(download) }
    }

    public func cancelAll() {
        for engine in engines { engine.cancelAll() }
    }

    public func waitForFinished(timeout: Double) -> [Download] { finished.wait(timeout: timeout) }

    /// Ends the sync thread's current (or next) wait at once, from any thread (``WaitInterrupt``).
    var waitInterrupt: WaitInterrupt { finished.interruption }

    public func shutdown() {
        for engine in engines { engine.shutdown() }
    }
}
