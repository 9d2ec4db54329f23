/// `--limit-rate RATE`: a ceiling on the bytes per second of the whole run.
///
/// Chosen mechanism: libcurl's own per-transfer limit, `CURLOPT_MAX_RECV_SPEED_LARGE`, set when a
/// transfer starts to the run's rate divided by the number of files that can run at once from
/// then on (`min(--jobs, files not yet finished)`), rather than a token bucket in the write
/// callback. libcurl then paces each transfer itself without pausing and unpausing handles on the
/// transfer thread. The division keeps the sum under the limit: every transfer running at a
/// given moment was started when at least as many files were unfinished as are running now, so
/// each got at most `rate / running`. The cost: a transfer keeps the share it started with, so
/// when the others finish early the run goes slower than the limit allows, never faster.
enum RateLimit {
    /// Bytes per second for one new transfer; at least 1 (0 would mean "no limit" to libcurl).
    static func share(of rate: Int64, jobs: Int, unfinished: Int) -> Int64 {
        let running = max(1, min(max(1, jobs), unfinished))
        return max(1, rate / Int64(running))
    }
}
