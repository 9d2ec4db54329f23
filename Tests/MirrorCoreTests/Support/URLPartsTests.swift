import Testing
@testable import MirrorCore
@testable import MirrorKit

@Suite struct URLPartsTests {
    @Test func hostKeysIgnoreCredentialsPathAndCase() {
        #expect(hostKey(of: "http://u:p@Mirror.Example:8080/a/b?c#d") == "http://mirror.example:8080")
        #expect(hostKey(of: "HTTPS://host/x") == "https://host")
        #expect(hostKey(of: "https://host") == "https://host")
        #expect(hostKey(of: "not a url") == "not a url")
    }

    @Test func redactionKeepsEverythingButTheUserInfo() {
        #expect(redactedURL("https://a:b@c@host/p") == "https://***@host/p", "user-info ends at the last @")
        #expect(redactedURL("https://host/p?next=a@b") == "https://host/p?next=a@b", "an @ after the authority is not user-info")
        #expect(redactedURL("file:///srv/a@b") == "file:///srv/a@b")
    }

    /// A combining mark after a delimiter makes one `Character` of the two, but curl reads the
    /// bytes: the delimiter still delimits, and the password is still masked.
    @Test func delimitersFollowedByCombiningMarksStillDelimit() {
        let mark = "\u{301}"
        let url = "https://" + mark + "u:pw@host/f"
        let parts = URLParts(url)
        #expect(parts?.userInfo.map(String.init) == mark + "u:pw@")
        #expect(parts?.hostAndPort == "host")
        #expect(redactedURL(url) == "https://***@host/f")
        let line = redactingURLs(in: "fetching " + url)
        #expect(!line.contains("pw"), "\(line)")
        let host = URLParts("https://u:pw@" + mark + "host/f").map { String($0.hostAndPort) }
        #expect(host == mark + "host")
    }
}
