import CLinux
import CCurl
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs every transfer of a run on one thread, through one libcurl multi handle.
///
/// The transfer thread loops: take newly submitted downloads (`curl_multi_add_handle`), drive them
/// (`curl_multi_perform`), collect the finished ones (`curl_multi_info_read`), then sleep in
/// `curl_multi_poll` until a socket is ready. Other threads never touch the multi handle; they
/// queue work under a lock and interrupt the poll with `curl_multi_wakeup`. Finished downloads are
/// handed back to the sync thread through ``waitForFinished(timeout:)``.
public final class TransferEngine {
    private let multi: CurlMulti
    private let condition = NSCondition()
    // Guarded by `condition`:
    private var submitted: [Download] = []
    private var cancelRequested = false
    private var cancelOne: [Download] = []
    private var stopRequested = false
    private var threadExited = false
    /// Downloads in the multi handle, keyed by easy handle. Transfer thread only.
    private var active: [UnsafeMutableRawPointer: Download] = [:]
    private var thread: Thread?

    /// `--limit-rate`: the run's token bucket (``RateLimiter``); transfer thread only.
    private let limiter: RateLimiter?

    /// Where finished downloads go: this engine's own queue, or one shared by several engines
    /// (``TransferPool``), so the sync thread waits on one queue for all.
    let finished: FinishedDownloads

    public convenience init(connectionsPerHost: Int = 8, limitRate: Int64? = nil) throws {
        try self.init(connectionsPerHost: connectionsPerHost, limitRate: limitRate, finished: FinishedDownloads())
    }

    init(connectionsPerHost: Int, limitRate: Int64?, finished: FinishedDownloads, name: String = "mirror-transfer") throws {
        self.finished = finished
        limiter = limitRate.map { RateLimiter(bytesPerSecond: $0) }
        multi = try CurlMulti()
        multi.limit(connectionsPerHost: connectionsPerHost)
        let thread = Thread { [unowned self] in
            // The kernel's name for the thread (`top -H`, /proc/PID/task/*/comm): Foundation's
            // Thread.name set before start does not reach it on Linux.
            _ = mirror_name_thread(name)
            self.run()
        }
        thread.name = name
        self.thread = thread
        thread.start()
    }

    deinit { shutdown() }

    /// Queues a download; it starts at the transfer thread's next turn.
    public func submit(_ download: Download) {
        condition.lock()
        submitted.append(download)
        condition.unlock()
        multi.wakeup()
    }

    /// Stops every transfer in progress; each comes back through ``waitForFinished(timeout:)``
    /// with outcome `.failed(.cancelled)` unless it finished first.
    public func cancelAll() {
        condition.lock()
        cancelRequested = true
        condition.unlock()
        multi.wakeup()
    }

    /// Stops these transfers (the other segments of a file whose segment failed); each comes back
    /// with outcome `.failed(.cancelled)` unless it finished first. Unlike setting
    /// ``Download/cancelled``, this also stops a transfer that receives nothing (a stalled one).
    public func cancel(_ downloads: [Download]) {
        guard !downloads.isEmpty else { return }
        condition.lock()
        cancelOne += downloads
        condition.unlock()
        multi.wakeup()
    }

    /// Waits up to `timeout` seconds for downloads to finish and returns them (possibly none).
    public func waitForFinished(timeout: Double) -> [Download] { finished.wait(timeout: timeout) }

    public func shutdown() {
        condition.lock()
        if threadExited || thread == nil {
            condition.unlock()
            return
        }
        stopRequested = true
        cancelRequested = true
        condition.unlock()
        multi.wakeup()
        condition.lock()
        while !threadExited { condition.wait() }
        condition.unlock()
        thread = nil
    }

    // MARK: - Transfer thread

    private func run() {
        while true {
            condition.lock()
            let incoming = submitted
            submitted.removeAll()
            let cancel = cancelRequested
            cancelRequested = false
            let stop = stopRequested
            let cancelSome = cancelOne
            cancelOne.removeAll()
            condition.unlock()

            for download in incoming {
                do {
                    download.limiter = limiter
                    try multi.add(download.easy)
                    active[download.easy.handle] = download
                } catch {
                    download.finish(code: CURLE_FAILED_INIT)
                    deliver(download)
                }
            }
            for download in cancelSome where active.removeValue(forKey: download.easy.handle) != nil {
                download.cancelled = true
                multi.remove(download.easy)
                download.finish(code: CURLE_ABORTED_BY_CALLBACK)
                deliver(download)
            }
            if cancel || stop {
                for (_, download) in active {
                    download.cancelled = true
                    multi.remove(download.easy)
                    download.finish(code: CURLE_ABORTED_BY_CALLBACK)
                    deliver(download)
                }
                active.removeAll()
            }
            if stop { break }

            if let limiter {
                for download in limiter.takeResumable() where active[download.easy.handle] === download {
                    curl_easy_pause(download.easy.handle, CURLPAUSE_CONT)
                }
            }
            _ = multi.perform()
            for (handle, code) in multi.finished() {
                guard let download = active.removeValue(forKey: handle) else { continue }
                multi.remove(download.easy)
                download.finish(code: code)
                deliver(download)
            }
            var timeout: Int32 = active.isEmpty ? 1000 : 200
            if let limiter, limiter.hasPaused { timeout = min(timeout, Int32(max(1, (limiter.wait() * 1000).rounded(.up)))) }
            multi.poll(timeoutMilliseconds: timeout)
        }
        condition.lock()
        threadExited = true
        condition.broadcast()
        condition.unlock()
    }

    private func deliver(_ download: Download) { finished.deliver(download) }
}

/// Downloads that ended, handed from the transfer threads to the sync thread.
final class FinishedDownloads {
    private let condition = NSCondition()
    private var list: [Download] = []

    func deliver(_ download: Download) {
        condition.lock()
        list.append(download)
        condition.broadcast()
        condition.unlock()
    }

    /// What has finished, waiting up to `timeout` seconds for something when nothing has.
    func wait(timeout: Double) -> [Download] {
        condition.lock()
        defer { condition.unlock() }
        if list.isEmpty && timeout > 0 {
            _ = condition.wait(until: Date(timeIntervalSinceNow: timeout))
        }
        let out = list
        list.removeAll()
        return out
    }
}
