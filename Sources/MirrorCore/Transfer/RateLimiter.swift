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
///
/// With a timetable (``RateSchedule``) the rate follows the local time: the bucket looks at the
/// clock (``LocalClock``) at most once a second, so a boundary takes effect within a second,
/// and never for one rate. A new rate applies to the debt already owed; a cap that begins empties
/// the bucket, and its end (`off`) lets every paused transfer go on at its next turn. Transfers
/// are never restarted for it. Transfer thread only: no lock.
final class RateLimiter {
    let schedule: RateSchedule
    private let clock: LocalClock
    /// Bytes per second now; nil while the timetable sets no cap.
    private(set) var rate: Double?
    /// Credit saved while idle, at most half a second's worth, so a pause does not become a burst.
    private var burst: Double = 1
    private var tokens: Double = 0
    private var last: Double
    /// When to look at the clock again (monotonic seconds); infinity for one rate.
    private var nextLook: Double
    private var paused: [Download] = []

    /// How often a timetable's limiter looks at the local time.
    static let lookInterval = 1.0

    convenience init(bytesPerSecond: Int64, now: Double = monotonicSeconds()) {
        self.init(schedule: RateSchedule(constant: max(1, bytesPerSecond)), now: now)
    }

    init(schedule: RateSchedule, clock: LocalClock = .process, now: Double = monotonicSeconds()) {
        self.schedule = schedule
        self.clock = clock
        last = now
        nextLook = now
        refill(now)
    }

    /// Sets `rate` (nil: no cap) from now on.
    private func apply(_ newRate: Int64?) {
        let value = newRate.map { Double(max(1, $0)) }
        guard value != rate else { return }
        if rate == nil { tokens = 0 }  // a cap begins: no credit from the time without one
        rate = value
        burst = max((value ?? 0) / 2, 1)
        tokens = min(tokens, burst)
    }

    /// Credits the time since the last call at the rate it had, then looks at the clock if due.
    private func refill(_ now: Double) {
        if let rate { tokens = min(burst, tokens + (now - last) * rate) }
        last = now
        if now >= nextLook {
            apply(schedule.rate(at: clock.read()))
            nextLook = schedule.isConstant ? .infinity : now + Self.lookInterval
        }
    }

    /// Takes `count` bytes if the bucket is not empty (always, without a cap); false (nothing
    /// taken) when it is.
    func admit(_ count: Int, now: Double = monotonicSeconds()) -> Bool {
        refill(now)
        guard rate != nil else { return true }
        guard tokens > 0 else { return false }
        tokens -= Double(count)
        return true
    }

    /// Seconds until ``admit(_:now:)`` can succeed again (0 when it can now), at most until the
    /// next look at the clock, which may lift the cap.
    func wait(now: Double = monotonicSeconds()) -> Double {
        refill(now)
        guard let rate, tokens <= 0 else { return 0 }
        return min(-tokens / rate + 0.001, max(0.001, nextLook - now))
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
