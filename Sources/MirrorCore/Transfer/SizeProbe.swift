import CCurl
import MirrorKit

/// Asks the server the size of each file a checksum list names, before the first byte of any of
/// them is fetched (`HEAD`, RFC 9110 §9.3.2, and its `Content-Length`, §8.6): the space check and
/// the plan need every size, which `SHA256SUMS` does not give.
///
/// The URLs are dealt to ``lanes`` threads, each with a multi handle of its own and so its own
/// connections: over HTTP/2 a lane's requests are streams of one connection (`CURLMOPT_PIPELINING`,
/// `CURLOPT_PIPEWAIT`, so that they wait for it rather than each opening one), up to ``streams``
/// at once, as many as nginx allows by default (`http2_max_concurrent_streams` 128); over
/// HTTP/1.1, which has no multiplexing, a lane takes turns on ``connectionsPerLane``
/// connections, 16 in all, the ceiling a run keeps to one host (docs/cli.md, "Files, requests and
/// connections"). On a 60 ms link (bench/wan, `mirror-sums` against `mirror`), asking 2,000 sizes
/// cost 1.2 s over HTTP/2 and 16 s over HTTP/1.1 with one lane of 8 connections and 100 streams,
/// and costs 0.7 s and 8.1 s with the lanes: HTTP/1.1 has no multiplexing, so 16 connections
/// take turns, a round trip each request. Each request has the settings of every download
/// (``TransferSettings/configure(_:url:)``). A `file:` URL is answered from the disk.
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

    static let lanes = 8
    static let connectionsPerLane = 2
    static let streams = 128

    /// One answer per URL, in order. Stops early (the rest `.failed("interrupted")`) on SIGINT or SIGTERM.
    static func sizes(of urls: [String], settings: TransferSettings) throws -> [Answer] {
        let laneCount = max(1, min(lanes, urls.count / 64 + 1))
        let answers = Locked([Answer?](repeating: nil, count: urls.count))
        WorkerPool.run(count: laneCount, threads: laneCount) { lane in
            let mine = Array(stride(from: lane, to: urls.count, by: laneCount))
            let found = Result { try probe(mine.map { urls[$0] }, settings: settings) }
            answers.withLock { all in
                for (offset, index) in mine.enumerated() {
                    switch found {
                    case .success(let got): all[index] = got[offset]
                    case .failure(let error): all[index] = .failed("\(error)")
                    }
                }
            }
        }
        return answers.withLock { $0 }.map { $0 ?? .failed("not asked") }
    }

    /// One lane: its URLs on one multi handle, ``streams`` at once.
    private static func probe(_ urls: [String], settings: TransferSettings) throws -> [Answer] {
        let multi = try CurlMulti()
        multi.limit(connectionsPerHost: connectionsPerLane, streams: streams)
        _ = mirror_curl_multi_setopt_long(multi.handle, CURLMOPT_MAX_TOTAL_CONNECTIONS, connectionsPerLane)
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
            while next < urls.count, running.count < streams {
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
