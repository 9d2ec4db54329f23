import Foundation
import Testing
@testable import MirrorCore
@testable import MirrorKit

/// Nothing printed for a person carries a character a terminal acts on (SECURITY.md): one function,
/// ``Formatting/printable(_:)``, and every sink uses it.
@Suite struct PrintableTests {
    @Test func controlsAreEscapedAndTextIsKept() {
        #expect(Formatting.printable("plain é 日本 🙂 a\\b") == "plain é 日本 🙂 a\\b")
        #expect(Formatting.printable("\u{1B}[2J") == "\\x1b[2J")
        #expect(Formatting.printable("\u{1B}]0;title\u{07}") == "\\x1b]0;title\\x07")
        #expect(Formatting.printable("a\nb\rc\td\u{0}e\u{7F}") == "a\\nb\\rc\\td\\x00e\\x7f")
        #expect(Formatting.printable("\u{9B}31m\u{85}") == "\\u{9B}31m\\u{85}")
        #expect(Formatting.printable("abc\u{202E}txt.exe\u{2066}\u{2028}") == "abc\\u{202E}txt.exe\\u{2066}\\u{2028}")
    }

    @Test func bytesThatAreNotUTF8AreShownByte() {
        let bytes: [UInt8] = [0x61, 0xFF, 0x1B, 0x5B, 0x48, 0xC3, 0xA9, 0xC2, 0x9B, 0xE2, 0x82]
        #expect(Formatting.printable(bytes: bytes) == "a\\xff\\x1b[Hé\\u{9B}\\xe2\\x82")
        #expect(Formatting.printable(bytes: Array("ok/é".utf8)) == "ok/é")
        #expect(Formatting.printable(bytes: [UInt8]()) == "")
    }

    @Test func forPeopleMasksThenEscapes() {
        #expect(Formatting.forPeople("from https://u:p\u{1B}@h/x \u{1B}[1m") == "from https://***@h/x \\x1b[1m")
    }

    @Test func everySinkEscapes() {
        let hostile = "a\u{1B}[2J\u{9B}b\u{202E}"
        let line = RunLog.line(time: 0, level: "failed", "x: \(hostile)\nnext")
        #expect(line == "1970-01-01T00:00:00Z failed x: a\\x1b[2J\\u{9B}b\\u{202E} next")
        #expect(JSONOutput.render(hostile) == "\"a\\u001b[2J\\u009bb\\u202e\"")
        let progress = ProgressRenderer.lines(ProgressSnapshot(active: [.init(path: "v/\u{202E}gpj.exe", done: 1, size: 2)],
                                                               filesDone: 0, filesTotal: 1, bytesDone: 1, bytesTotal: 2, rate: nil),
                                              width: 80)
        #expect(progress.first?.contains("v/\\u{202E}gpj.exe") == true, "\(progress)")
    }
}
