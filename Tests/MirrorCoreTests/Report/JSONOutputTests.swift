import Foundation
@testable import MirrorState
import Testing
@testable import MirrorCore
@testable import MirrorKit

/// `--json` goes through one encoder (``JSONOutput``) for sync, status and verify: the documents
/// keep the names, nesting and values of the emitters built by hand before them, round-trip
/// through `JSONDecoder`, and never carry a terminal control raw (SECURITY.md). Fields added since
/// (`last_success`, `manifest`) are in the pinned texts as null.
@Suite struct JSONOutputTests {
    static let hostile = "\u{1B}]0;owned\u{07}\u{1B}[2J\u{9B}31m\u{202E}txt\u{2028}\u{2029}\u{7F}\u{85}\u{061C}\u{2066}.exe\u{08}\u{0C}\"\\/é"

    static func syncSummary() -> SyncSummary {
        var s = SyncSummary()
        s.result = .incomplete("deadline \(hostile) https://u:p@h.example/x")
        s.total = 9; s.upToDate = 2; s.checked = 1; s.downloaded = 2; s.replaced = 1; s.failed = 1; s.pending = 2
        s.bytesTransferred = 735_051_776
        s.seconds = 14.2134
        s.results = [
            EntryResult(path: "videos/intro.mp4", outcome: .downloaded, size: 734_003_200, source: "https://***@m.example/a b/intro.mp4"),
            EntryResult(path: "v/\(hostile)", outcome: .replaced, size: 0, source: nil, fromMirror: true),
            EntryResult(path: "bad.bin", outcome: .failed("HTTP 404 at https://u:p@h.example/bad \(hostile)"), size: 5, source: nil),
        ]
        s.plan = ["download a (1 B)", "blocked \(hostile): a folder"]
        return s
    }

    static func status(full: Bool) -> DestinationStatus {
        let entries = [
            EntryStatus(path: "a.bin", state: .done, size: 10),
            EntryStatus(path: "b \(hostile)", state: .partial, size: 1000, partialBytes: 400),
            EntryStatus(path: "c.bin", state: .failed, size: 3, partialBytes: 1, error: "boom \(hostile) https://u:p@h.example/c", failedAt: 1_763_780_000),
            EntryStatus(path: "d.bin", state: .unverified, size: 4),
            EntryStatus(path: "e.bin", state: .blocked, size: 5, error: "a folder is in the way"),
            EntryStatus(path: "f.bin", state: .missing, size: 0, partialBytes: 0),
        ]
        return DestinationStatus(destination: "/srv/\(hostile)", destinationExists: full, entries: full ? entries : [],
                                 lastRun: full ? RunRecord(start: 1_763_780_000, end: 1_763_780_966, result: "incomplete",
                                                           downloaded: 2, failed: 1, bytes: 1400) : nil,
                                 runningPid: full ? 4242 : nil, hasJournal: full)
    }

    static func verifySummary() -> VerifySummary {
        var v = VerifySummary(destination: "/srv/\(hostile)")
        v.total = 5; v.good = 2; v.bytesRead = 123_456; v.seconds = 5.2
        v.problems.append(VerifyProblem(path: "m \(hostile)", kind: .missing, message: "missing", expectedSize: 3))
        var corrupt = VerifyProblem(path: "c.bin", kind: .corrupt, message: "checksum mismatch (expected sha256 ab…)", expectedSize: 4)
        corrupt.actualSize = 4
        corrupt.expectedSHA256 = String(repeating: "ab", count: 32)
        corrupt.actualSHA256 = String(repeating: "cd", count: 32)
        corrupt.expectedSHA512 = String(repeating: "ef", count: 64)
        v.problems.append(corrupt)
        v.problems.append(VerifyProblem(path: "u.bin", kind: .unreadable, message: "permission denied \(hostile)", expectedSize: 1))
        return v
    }

    /// The eight documents of the fixtures above, in the order of ``before``.
    static func documents() -> [String] {
        [syncSummary().json, SyncSummary().json,
         JSONOutput.render(SyncDocument.earlyEnd("lock held \(hostile)", temporary: true, exitCode: 75)),
         JSONOutput.render(SyncDocument.earlyEnd("bad manifest https://u:p@h/x", temporary: false, exitCode: 65)),
         status(full: true).json, status(full: false).json, verifySummary().json, VerifySummary(destination: "/d").json]
    }

    /// What the hand-built emitters this encoder replaced printed for the same fixtures (their key
    /// order, `\u0008`, `0.0`): the new output must parse to the same names, nesting and values.
    /// Since then `files.deleted` was added (`--delete`), `files.excluded` (`--include`, `--exclude`)
    /// and `files.not_reached` (of `failed`, those whose server could not be reached);
    /// `status` gained `interrupted_run`, `verify` `files.attributes` and `recorded`.
    static let before = [
        #"{"last_success":null,"result":"incomplete","reason":"deadline \u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066.exe\u0008\u000c\"\\/é https://***@h.example/x","files":{"total":9,"up_to_date":3,"checked":1,"downloaded":2,"replaced":1,"failed":1,"not_reached":0,"pending":2,"deleted":0,"excluded":0},"bytes_transferred":735051776,"seconds":14.213,"changed":[{"path":"videos/intro.mp4","action":"downloaded","size":734003200,"source":"https://***@m.example/a b/intro.mp4"},{"path":"v/\u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066.exe\u0008\u000c\"\\/é","action":"replaced","size":0,"source":null}],"failures":[{"path":"bad.bin","error":"HTTP 404 at https://***@h.example/bad \u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066.exe\u0008\u000c\"\\/é"}],"plan":["download a (1 B)","blocked \u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066.exe\u0008\u000c\"\\/é: a folder"]}"#,
        #"{"last_success":null,"result":"ok","files":{"total":0,"up_to_date":0,"checked":0,"downloaded":0,"replaced":0,"failed":0,"not_reached":0,"pending":0,"deleted":0,"excluded":0},"bytes_transferred":0,"seconds":0.0,"changed":[],"failures":[]}"#,
        #"{"last_success":null,"result":"incomplete","reason":"lock held \u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066.exe\u0008\u000c\"\\/é","files":{"total":0,"up_to_date":0,"checked":0,"downloaded":0,"replaced":0,"failed":0,"not_reached":0,"pending":0,"deleted":0,"excluded":0},"bytes_transferred":0,"seconds":0.0,"changed":[],"failures":[],"exit_code":75}"#,
        #"{"last_success":null,"result":"failed","files":{"total":0,"up_to_date":0,"checked":0,"downloaded":0,"replaced":0,"failed":0,"not_reached":0,"pending":0,"deleted":0,"excluded":0},"bytes_transferred":0,"seconds":0.0,"changed":[],"failures":[],"reason":"bad manifest https://***@h/x","exit_code":65}"#,
        #"{"last_success":null,"manifest":null,"destination":"/srv/\u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066.exe\u0008\u000c\"\\/é","destination_exists":true,"sync_running":true,"sync_pid":4242,"files":{"total":6,"done":1,"partial":1,"failed":1,"unverified":1,"blocked":1,"missing":1,"excluded":0},"bytes":{"total":1022,"done":10,"partial_downloaded":401},"interrupted_run":null,"last_run":{"start":"2025-11-22T02:53:20Z","end":"2025-11-22T03:09:26Z","start_unix":1763780000,"end_unix":1763780966,"result":"incomplete","downloaded":2,"failed":1,"bytes":1400},"entries":[{"path":"b \u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066.exe\u0008\u000c\"\\/é","state":"partial","size":1000,"partial_bytes":400,"percent":40.0},{"path":"c.bin","state":"failed","size":3,"partial_bytes":1,"percent":33.3,"error":"boom \u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066.exe\u0008\u000c\"\\/é https://***@h.example/c","failed_at":"2025-11-22T02:53:20Z"},{"path":"d.bin","state":"unverified","size":4},{"path":"e.bin","state":"blocked","size":5,"error":"a folder is in the way"},{"path":"f.bin","state":"missing","size":0,"partial_bytes":0,"percent":100.0}]}"#,
        #"{"last_success":null,"manifest":null,"destination":"/srv/\u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066.exe\u0008\u000c\"\\/é","destination_exists":false,"sync_running":false,"sync_pid":null,"files":{"total":0,"done":0,"partial":0,"failed":0,"unverified":0,"blocked":0,"missing":0,"excluded":0},"bytes":{"total":0,"done":0,"partial_downloaded":0},"last_run":null,"interrupted_run":null,"entries":[]}"#,
        #"{"result":"failed","destination":"/srv/\u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066.exe\u0008\u000c\"\\/é","files":{"total":5,"good":2,"corrupt":1,"missing":1,"unreadable":1,"attributes":0,"excluded":0},"recorded":null,"bytes_read":123456,"seconds":5.2,"problems":[{"path":"m \u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066.exe\u0008\u000c\"\\/é","state":"missing","error":"missing","expected_size":3,"actual_size":null,"expected_sha256":null,"actual_sha256":null,"expected_sha512":null,"actual_sha512":null},{"path":"c.bin","state":"corrupt","error":"checksum mismatch (expected sha256 ab…)","expected_size":4,"actual_size":4,"expected_sha256":"abababababababababababababababababababababababababababababababab","actual_sha256":"cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd","expected_sha512":"efefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefef","actual_sha512":null},{"path":"u.bin","state":"unreadable","error":"permission denied \u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066.exe\u0008\u000c\"\\/é","expected_size":1,"actual_size":null,"expected_sha256":null,"actual_sha256":null,"expected_sha512":null,"actual_sha512":null}]}"#,
        #"{"result":"ok","destination":"/d","recorded":null,"files":{"total":0,"good":0,"corrupt":0,"missing":0,"unreadable":0,"attributes":0,"excluded":0},"bytes_read":0,"seconds":0.0,"problems":[]}"#,
    ]

    static func parse(_ json: String) throws -> NSDictionary {
        try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? NSDictionary, "\(json)")
    }

    @Test func everyDocumentParsesToWhatTheHandBuiltEmittersPrinted() throws {
        let now = Self.documents()
        #expect(now.count == Self.before.count)
        for (new, old) in zip(now, Self.before) {
            #expect(try Self.parse(new) == Self.parse(old), "\(new)\n\(old)")
        }
    }

    /// Sorted keys, no escaped `/`, integral numbers without `.0`: the byte layout, pinned.
    @Test func keysAreSortedAndTheLayoutIsStable() {
        #expect(SyncSummary().json == #"{"bytes_transferred":0,"changed":[],"failures":[],"files":{"checked":0,"deleted":0,"downloaded":0,"#
                + #""excluded":0,"failed":0,"not_reached":0,"pending":0,"replaced":0,"total":0,"up_to_date":0},"last_success":null,"result":"ok","seconds":0}"#)
        #expect(VerifySummary(destination: "/srv/a b").json == #"{"bytes_read":0,"destination":"/srv/a b","#
                + #""files":{"attributes":0,"corrupt":0,"excluded":0,"good":0,"missing":0,"total":0,"unreadable":0},"problems":[],"#
                + #""recorded":null,"result":"ok","seconds":0}"#)
        #expect(Self.documents() == Self.documents(), "the same document gives the same bytes")
    }

    @Test func everyDocumentRoundTripsThroughJSONDecoder() throws {
        let decoder = JSONOutput.makeDecoder()
        let sync = SyncDocument(Self.syncSummary())
        #expect(try decoder.decode(SyncDocument.self, from: Data(Self.syncSummary().json.utf8)) == sync)
        #expect(sync.reason?.contains(Self.hostile) == true, "the hostile text survives, escaped only in transit")
        let early = SyncDocument.earlyEnd("lock held", temporary: true, exitCode: 75)
        #expect(try decoder.decode(SyncDocument.self, from: Data(JSONOutput.render(early).utf8)) == early)
        for full in [true, false] {
            let status = Self.status(full: full)
            #expect(try decoder.decode(StatusDocument.self, from: Data(status.json.utf8)) == StatusDocument(status))
        }
        for verify in [Self.verifySummary(), VerifySummary(destination: "/d")] {
            #expect(try decoder.decode(VerifyDocument.self, from: Data(verify.json.utf8)) == VerifyDocument(verify))
        }
    }

    /// No document carries a terminal control raw, while each decodes back to the original text.
    @Test func hostileCharactersAreEscapedInEveryDocument() throws {
        for json in Self.documents() {
            let raw = json.unicodeScalars.filter(Formatting.needsEscape)
            #expect(raw.isEmpty, "raw \(raw.map { String($0.value, radix: 16) }) in \(json)")
            #expect(json.unicodeScalars.allSatisfy { $0.isASCII || $0 == "é" || $0 == "…" }, "\(json)")
        }
        let status = try Self.parse(Self.status(full: true).json)
        #expect(status["destination"] as? String == "/srv/\(Self.hostile)")
        #expect(Self.status(full: true).json.contains(#"\u001b]0;owned\u0007\u001b[2J\u009b31m\u202etxt\u2028\u2029\u007f\u0085\u061c\u2066"#))
    }

    /// Each character ``Formatting/needsEscape(_:)`` names is written `\uXXXX` (C0 by the
    /// encoder, `\b`-style where RFC 8259 has a short form; the rest by ``JSONOutput``), and
    /// every other character of the ranges around them is kept.
    @Test func eachControlIsEscapedAndItsNeighboursAreKept() throws {
        let short: [UInt32: String] = [0x08: "\\b", 0x09: "\\t", 0x0a: "\\n", 0x0c: "\\f", 0x0d: "\\r"]
        for value in Array(0x00...0xa0) + Array(0x0600...0x0620) + Array(0x2000...0x2070) {
            let scalar = try #require(Unicode.Scalar(UInt32(value)))
            let json = JSONOutput.render(String(scalar))
            if Formatting.needsEscape(scalar) {
                let hex = String(value, radix: 16)
                let expected = short[UInt32(value)] ?? "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                #expect(json == "\"" + expected + "\"", "U+\(hex)")
            } else if scalar != "\"" && scalar != "\\" {
                #expect(json == "\"\(scalar)\"", "U+\(String(value, radix: 16))")
            }
        }
    }

    /// A duration that is not finite (a bug upstream) still gives one parseable document.
    @Test func aNonFiniteNumberStillGivesJSON() throws {
        var summary = SyncSummary()
        summary.seconds = .nan
        #expect(try Self.parse(summary.json)["seconds"] as? String == "nan")
    }

    /// The fallback document (an encoder failure) quotes the error by hand: a quote or a
    /// backslash followed by a combining mark is one `Character` but still ends or escapes a
    /// JSON string, and controls must be escaped too.
    @Test func theFallbackQuotesByScalars() throws {
        let text = "a\"\u{301}b\\\u{301}c\nd\u{1B}e"
        let expected = "a\\\"\u{301}b\\\\\u{301}c\\u000ad\\u001be"
        let body = JSONOutput.jsonStringBody(text)
        #expect(body.unicodeScalars.elementsEqual(expected.unicodeScalars), "\(body)")
        let document = Data(("{\"e\":\"" + body + "\"}").utf8)
        let parsed = try JSONSerialization.jsonObject(with: document) as? [String: String]
        #expect(parsed?["e"]?.unicodeScalars.elementsEqual(text.unicodeScalars) == true)
    }
}
