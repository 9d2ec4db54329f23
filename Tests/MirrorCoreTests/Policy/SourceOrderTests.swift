import Testing
import MirrorCore
import MirrorKit

/// `--prefer` source order without a server (``SourceOrder``).
struct SourceOrderTests {
    @Test func withoutPreferTheListIsTheManifests() {
        #expect(SourceOrder().sources(forPath: "a b.iso", manifestSources: ["https://o/a%20b.iso", "https://m/a%20b.iso"])
                == ["https://o/a%20b.iso", "https://m/a%20b.iso"])
    }

    @Test func preferredBasesComeFirstInOrderWithThePathEncoded() {
        let order = SourceOrder(preferred: ["http://cache:8080/set/", "http://peer/"])
        #expect(order.sources(forPath: "videos/intro 1.mp4", manifestSources: ["https://o/v/intro.mp4"])
                == ["http://cache:8080/set/videos/intro%201.mp4", "http://peer/videos/intro%201.mp4", "https://o/v/intro.mp4"])
        #expect(order.sources(forPath: "é+;x", manifestSources: []) == ["http://cache:8080/set/%C3%A9%2B%3Bx", "http://peer/%C3%A9%2B%3Bx"])
    }

    @Test func aPreferredURLThatIsAlsoTheManifestsIsAskedOnce() {
        let order = SourceOrder(preferred: ["https://o/"])
        #expect(order.sources(forPath: "a", manifestSources: ["https://o/a", "https://m/a"]) == ["https://o/a", "https://m/a"])
    }

    @Test func preferredURLsAreKnownAsSuch() {
        let order = SourceOrder(preferred: ["http://cache/set/"])
        #expect(order.isPreferred("http://cache/set/a.iso"))
        #expect(!order.isPreferred("https://origin/set/a.iso"))
        #expect(!order.isPreferred("http://cache/other/a.iso"))
    }

    @Test func aBaseMustBeHTTPWithoutAQueryAndEndsInASlash() throws {
        #expect(try SourceOrder.parseBase("http://cache.lab:8080/set") == "http://cache.lab:8080/set/")
        #expect(try SourceOrder.parseBase("HTTPS://peer/") == "HTTPS://peer/")
        for bad in ["ftp://h/", "file:///srv/set/", "cache.lab/set", "http:///set", "http://h/?a=1", "http://h/#x", "http://h/a b", ""] {
            #expect(throws: ArgumentValueError.notABaseURL, "\(bad)") { try SourceOrder.parseBase(bad) }
        }
    }
}
