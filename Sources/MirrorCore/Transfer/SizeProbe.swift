import CCurl
import MirrorKit

/// Asks the server the size of each file a checksum list names, before the first byte of any of
/// them is fetched (`HEAD`, RFC 9110 §9.3.2, and its `Content-Length`, §8.6): the space check and
/// the plan need every size, which `SHA256SUMS` does not give.
///
/// The requests share one multi handle, multiplexed on HTTP/2 (`CURLMOPT_PIPELINING`,
/// `CURLOPT_PIPEWAIT`, so that they wait for the first connection rather than each opening one)
/// and at most ``connections`` connections to a host over HTTP/1.1, with ``inFlight`` at once: 2,000
/// files on a 60 ms link cost a few round trips, not 2,000. Each request has the settings of every
/// download (``TransferSettings/configure(_:url:)``). A `file:` URL is answered from the disk.
enum SizeProbe {
    /// How one file's size came back.
    enum Answer: Equatable {
        case size(Int64)
        /// Answered without a length (a dynamic page, a server that sends none for HEAD).
        case noLength(status: Int)
        /// 4xx or 5xx.
        case status(Int)
        case failed(String)
    }

    static let connections = 8
    static let inFlight = 256

    /// One answer per URL, in order. Stops early (the rest `.failed("interrupted")`) on SIGINT or SIGTERM.
    static func sizes(of urls: [String], settings: TransferSettings) throws -> [Answer] {
        let multi = try CurlMulti()
        multi.limit(connectionsPerHost: connections, streams: 100)
        _ = mirror_curl_multi_setopt_long(multi.handle, CURLMOPT_MAX_TOTAL_CONNECTIONS, connections)
        var answers = [Answer?](repeating: nil, count: urls.count)
        var running: [UnsafeMutableRawPointer: (index: Int, easy: CurlEasy)] = [:]
        var next = 0
        func start(_ index: Int) {
            do {
                let easy = try CurlEasy()
                let headers = try settings.configure(easy, url: urls[index])
                if !headers.isEmpty { try easy.setHeaders(headers) }
                try easy.set(CURLOPT_NOBODY, 1)
                try easy.set(CURLOPT_PIPEWAIT, 1)
                try multi.add(easy)
                running[easy.handle] = (index, easy)
            } catch {
                answers[index] = .failed("\(error)")
            }
        }
        while next < urls.count || !running.isEmpty {
            while next < urls.count, running.count < inFlight {
                start(next)
                next += 1
            }
            if StopSignal.received != 0 {
                for (_, job) in running { multi.remove(job.easy); answers[job.index] = .failed("interrupted") }
                running = [:]
                while next < urls.count { answers[next] = .failed("interrupted"); next += 1 }
                break
            }
            _ = multi.perform()
            for (handle, code) in multi.finished() {
                guard let job = running.removeValue(forKey: handle) else { continue }
                multi.remove(job.easy)
                answers[job.index] = answer(job.easy, code: code)
            }
            if !running.isEmpty { multi.poll(timeoutMilliseconds: 200) }
        }
        return answers.map { $0 ?? .failed("not asked") }
    }

    private static func answer(_ easy: CurlEasy, code: CURLcode) -> Answer {
        guard code == CURLE_OK else { return .failed(redactingURLs(in: easy.message(for: code))) }
        let status = easy.responseCode
        if status >= 400 { return .status(status) }
        var length: curl_off_t = -1
        _ = mirror_curl_easy_getinfo_off_t(easy.handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
        return length >= 0 ? .size(Int64(length)) : .noLength(status: status)
    }
}
