import CCurl
import MirrorKit

/// `--limit-rate RATE`: one token bucket for the whole run, shared by every transfer on the
/// transfer thread (and so by every segment and file), filled at RATE bytes per second.
///
/// Why a bucket and not libcurl's `CURLOPT_MAX_RECV_SPEED_LARGE`: libcurl (7.88 at least) checks
/// its limit only between reads, resets its measurement every 3 s and drains whatever the kernel
/// buffered in between, so on a fast link it overshoots by the socket buffer size each period
/// (measured: 2 MiB/s asked, 3 to 10 MiB/s received); a per-transfer limit must also be divided
/// among transfers by guessing how many will run. Here the write callback admits a piece of body
/// while the bucket holds any token (taking the whole piece, possibly going into debt), and
/// otherwise returns `CURL_WRITEFUNC_PAUSE`: libcurl keeps the piece, stops reading the socket,
/// and TCP's window slows the sender. The transfer thread resumes paused transfers with
/// `curl_easy_pause(CURLPAUSE_CONT)` once the debt is repaid, and sleeps no longer than that.
/// Transfer thread only: no lock.
final class RateLimiter {
    let rate: Double
    /// Credit saved while idle, at most half a second's worth, so a pause does not become a burst.
    let burst: Double
    private var tokens: Double
    private var last: Double
    private var paused: [Download] = []

    init(bytesPerSecond: Int64, now: Double = monotonicSeconds()) {
        rate = Double(max(1, bytesPerSecond))
        burst = max(rate / 2, 1)
        tokens = 0
        last = now
    }

    private func refill(_ now: Double) {
        tokens = min(burst, tokens + (now - last) * rate)
        last = now
    }

    /// Takes `count` bytes if the bucket is not empty; false (nothing taken) when it is.
    func admit(_ count: Int, now: Double = monotonicSeconds()) -> Bool {
        refill(now)
        guard tokens > 0 else { return false }
        tokens -= Double(count)
        return true
    }

    /// Seconds until ``admit(_:now:)`` can succeed again (0 when it can now).
    func wait(now: Double = monotonicSeconds()) -> Double {
        refill(now)
        return tokens > 0 ? 0 : -tokens / rate + 0.001
    }

    /// Remembers a transfer that returned `CURL_WRITEFUNC_PAUSE`.
    func didPause(_ download: Download) { paused.append(download) }

    var hasPaused: Bool { !paused.isEmpty }

    /// The paused transfers to resume now (all of them once the bucket has tokens; each admits
    /// or pauses again in its own callback, so a slow bucket is shared fairly enough).
    func takeResumable(now: Double = monotonicSeconds()) -> [Download] {
        guard !paused.isEmpty, wait(now: now) == 0 else { return [] }
        defer { paused.removeAll() }
        return paused
    }
}
