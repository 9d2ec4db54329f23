import Testing
@testable import MirrorCore

/// `Download.parseHeaderLine`: raw lines as libcurl's header callback passes them.
@Suite struct HeaderLineTests {
    private func parse(_ text: String) -> Download.HeaderLine {
        Array(text.utf8).withUnsafeBytes { Download.parseHeaderLine($0) }
    }

    @Test func statusLinesStartANewResponse() {
        #expect(parse("HTTP/1.1 302 Found\r\n") == .statusLine)
        #expect(parse("HTTP/2 206\r\n") == .statusLine)
        #expect(parse("HTTP\r\n") == .ignored)
    }

    @Test func keptHeadersAreLowercasedAndTrimmed() {
        #expect(parse("Content-Range:\t bytes 100-999/1000 \r\n") == .kept(name: "content-range", value: "bytes 100-999/1000"))
        #expect(parse("CONTENT-length: 900\r\n") == .kept(name: "content-length", value: "900"))
        #expect(parse("ETag:\r\n") == .kept(name: "etag", value: ""))
        #expect(parse("Retry-After: 5\n") == .kept(name: "retry-after", value: "5"))
    }

    @Test func otherLinesAreIgnored() {
        #expect(parse("Location: http://elsewhere/\r\n") == .ignored)
        #expect(parse("Content-Range bytes 1-2/3\r\n") == .ignored, "no colon")
        #expect(parse("Content-Rangex: bytes 1-2/3\r\n") == .ignored)
        #expect(parse(" Content-Length: 5\r\n") == .ignored, "a folded or indented line is not a kept header")
        #expect(parse("\r\n") == .ignored)
        #expect(parse("") == .ignored)
    }

    @Test func hostileValuesAreKeptWhole() {
        let long = String(repeating: "x", count: 100_000)
        #expect(parse("ETag: \"\(long)\"\r\n") == .kept(name: "etag", value: "\"\(long)\""))
        // Invalid UTF-8 becomes U+FFFD rather than failing; the value is then simply not a number.
        let bytes: [UInt8] = Array("Content-Length: 1".utf8) + [0xFF, 0x00] + Array("2\r\n".utf8)
        let line = bytes.withUnsafeBytes { Download.parseHeaderLine($0) }
        #expect(line == .kept(name: "content-length", value: "1\u{FFFD}\u{0}2"))
        if case .kept(_, let value) = line { #expect(ResponseCheck.parseLength(value) == nil) }
    }
}
