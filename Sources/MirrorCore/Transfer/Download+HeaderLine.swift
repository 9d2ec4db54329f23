/// How ``Download`` reads a response head: one header line at a time, as libcurl's
/// `CURLOPT_HEADERFUNCTION` passes it, keeping only the headers ``ResponseCheck`` reads.
extension Download {
    /// What one raw header line (as libcurl's `CURLOPT_HEADERFUNCTION` passes it, CR LF included)
    /// means to ``ResponseCheck``.
    enum HeaderLine: Equatable {
        /// `HTTP/…`: a new response begins.
        case statusLine
        /// A header the response checks read: its lowercased name and its value without the
        /// optional whitespace around it.
        case kept(name: String, value: String)
        /// Any other header, the blank line ending the head, or a line that is not a header.
        case ignored
    }

    /// Pure and bounded (one pass over the line), so the fuzz target can call it with hostile
    /// lines. Only the headers the response checks read are kept, and the line is handled as
    /// bytes: this runs once per header of every response, which adds up over thousands of files.
    static func parseHeaderLine(_ line: UnsafeRawBufferPointer) -> HeaderLine {
        if line.count >= 5 && line[0] == 0x48 && line[1] == 0x54 && line[2] == 0x54 && line[3] == 0x50 && line[4] == 0x2F {
            return .statusLine  // "HTTP/"
        }
        guard let colon = line.firstIndex(of: 0x3A), let name = Download.keptHeader(line[0..<colon]) else { return .ignored }
        var start = colon + 1
        var end = line.count
        while start < end, Download.isHeaderSpace(line[start]) { start += 1 }
        while end > start, Download.isHeaderSpace(line[end - 1]) { end -= 1 }
        return .kept(name: name, value: String(decoding: UnsafeRawBufferPointer(rebasing: line[start..<end]), as: UTF8.self))
    }

    /// The headers ``ResponseCheck`` reads, lowercased.
    static let keptHeaders: [(bytes: [UInt8], name: String)] = [
        "content-length", "content-range", "content-encoding", "content-type", "etag", "last-modified", "retry-after",
    ].map { (Array($0.utf8), $0) }

    /// The lowercased name if `raw` (a header name, any case) is one of ``keptHeaders``.
    static func keptHeader(_ raw: Slice<UnsafeRawBufferPointer>) -> String? {
        candidates: for (bytes, name) in keptHeaders where bytes.count == raw.count {
            var i = raw.startIndex
            for b in bytes {
                let c = raw[i]
                if (c >= 0x41 && c <= 0x5A ? c | 0x20 : c) != b { continue candidates }
                i += 1
            }
            return name
        }
        return nil
    }

    /// Optional whitespace around a field value (RFC 9110 §5.5), and the line's CR LF.
    static func isHeaderSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0D || c == 0x0A }
}
