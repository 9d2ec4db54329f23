import Foundation
import Testing
@testable import MirrorCore
@testable import MirrorKit
import MirrorTestSupport

/// One rule masks the user-info of every URL in every output (RFC 3986 §3.2.1: user-info ends at
/// the last `@` before the authority ends at `/`, `?` or `#`), whatever characters the password holds.
@Suite struct RedactionTests {
    /// Passwords holding each character that an earlier version took for the end of a URL, and
    /// the others a user-info may hold.
    static let passwords = ["pa)ss", "pa'ss", "pa\"ss", "pa@ss", "pa:ss", "pa%20ss", ")", "'", "\"", "@", "(x)'\"@:%20<y>"]
    static let secret = "pa"  // every password above that has letters starts with it

    static func url(_ password: String, path: String = "/m.yaml") -> String {
        "https://reader:\(password)@host.example:8443\(path)"
    }

    @Test(arguments: passwords)
    func oneURLIsMaskedWhateverItsPasswordHolds(_ password: String) {
        #expect(redactedURL(Self.url(password)) == "https://***@host.example:8443/m.yaml")
        #expect(redactedURL(Self.url(password, path: "")) == "https://***@host.example:8443")
        #expect(redactedURL(Self.url(password, path: "?q=1")) == "https://***@host.example:8443?q=1")
    }

    /// In text the URL sits between quotes, parentheses, brackets, or at the end of the line; none
    /// of those may end it before its authority does.
    @Test(arguments: passwords)
    func urlsInTextAreMaskedWhateverSurroundsThem(_ password: String) {
        let url = Self.url(password)
        let masked = "https://***@host.example:8443/m.yaml"
        for (text, expected) in [
            ("start sync \(url) --dest d", "start sync \(masked) --dest d"),
            ("manifest \"\(url)\" fetched", "manifest \"\(masked)\" fetched"),
            ("(last tried \(url))", "(last tried \(masked))"),
            ("'\(url)'", "'\(masked)'"),
            ("<\(url)>", "<\(masked)>"),
            ("\(url): 503", "\(masked): 503"),
            ("\(url)", masked),
            ("a\n\(url)\tb", "a\n\(masked)\tb"),
            ("two: \(url) and \(url)", "two: \(masked) and \(masked)"),
        ] {
            #expect(redactingURLs(in: text) == expected, "\(text.debugDescription)")
        }
        // Without a path the authority runs to the next space: the password is still masked.
        #expect(redactingURLs(in: "(\(Self.url(password, path: ""))) x") == "(https://***@host.example:8443) x")
    }

    @Test func aLiteralSpaceInAPasswordIsInsideOneURL() {
        // A command-line argument may hold one; the caller masks the URL before it goes into text.
        #expect(redactedURL("http://u:p w@h/m") == "http://***@h/m")
        #expect(!redactingURLs(in: "start sync \(redactedURL("http://u:secret w@h/m"))").contains("secret"))
    }

    @Test func whatIsNotUserInfoIsLeftAlone() {
        #expect(redactingURLs(in: "no url here") == "no url here")
        #expect(redactingURLs(in: "\"http://h/p@x\"") == "\"http://h/p@x\"", "an @ after the path starts is not user-info")
        #expect(redactingURLs(in: "https://h?next=a@b") == "https://h?next=a@b")
        #expect(redactingURLs(in: "https://h#a@b") == "https://h#a@b")
        #expect(redactingURLs(in: "http://h: refused; mail root@localhost") == "http://h: refused; mail root@localhost",
                "a space ends the authority in text")
        #expect(redactedURL("file:///srv/a@b") == "file:///srv/a@b")
        #expect(redactingURLs(in: "é https://u:p@h/ é") == "é https://***@h/ é")
        #expect(redactingURLs(in: "x ://") == "x ://")
    }

    @Test func maskingTwiceChangesNothing() {
        for password in Self.passwords {
            let once = redactingURLs(in: "x \(Self.url(password)) y")
            #expect(redactingURLs(in: once) == once)
            #expect(redactedURL(redactedURL(Self.url(password))) == redactedURL(Self.url(password)))
        }
    }

    /// Each sink masks on its own: the metrics label, a log line, the JSON reports, a manifest error.
    @Test(arguments: passwords)
    func everySinkMasks(_ password: String) throws {
        let url = Self.url(password)
        let metrics = MetricsFile.render(RunMetrics(manifest: url, destination: "/srv/d", start: 1, end: 2,
                                                    result: .unreachable, exitCode: 75, summary: nil))
        #expect(!metrics.contains("reader:"), "\(metrics)")
        #expect(metrics.contains("manifest=\"https://***@host.example:8443/m.yaml\""))
        #expect(!RunLog.line(time: 0, level: "info", "start sync \(url)").contains("reader:"))
        #expect(!JSONOutput.render(SyncDocument.earlyEnd("\(url): cannot fetch", temporary: false, exitCode: 75)).contains("reader:"))
        var summary = SyncSummary()
        summary.results = [EntryResult(path: "a", outcome: .failed("503 (last tried \(url))"), size: 1, source: nil)]
        summary.failed = 1
        summary.result = .incomplete("stopped at \(url)")
        #expect(!summary.json.contains("reader:"), "\(summary.json)")
    }

    /// A manifest error quotes the URL it refuses, shortened to 120 characters: the cut must not
    /// fall between a password and its `@`.
    @Test(arguments: passwords)
    func manifestErrorsQuoteTheMaskedURL(_ password: String) {
        let long = "https://reader:\(password)\(String(repeating: "x", count: 130))@host.example/base"  // no trailing "/"
        let error = ManifestFixture.error("version: 1\nbase_url: \(ManifestBuilder.quoted(long))\nfiles: []\n")
        let message = error.map(\.description) ?? ""
        #expect(message.contains("must end with"), "\(message)")
        #expect(!message.contains("reader:") && !message.contains("xxxx"), "\(message)")
    }
}
