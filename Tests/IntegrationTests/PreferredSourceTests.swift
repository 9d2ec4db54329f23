import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// A `--prefer` source (a site cache, a neighbour) is only a cheaper place to ask first: when it
/// refuses or throttles, the entry goes on to the manifest's sources at once, and the preferred
/// source's `Retry-After` (RFC 9110 §10.2.3) never delays them (docs/fleet.md, "--prefer").
@Suite struct PreferredSourceTests {
    /// A cache that answers every file with `status` and `Retry-After: 1500` (25 minutes): within
    /// a 30 s deadline every file comes from the origin, each asked once of the cache, exit 0.
    @Test(arguments: [503, 429])
    func aPreferredSourceThatRefusesWithALongRetryAfterHoldsNoFile(status: Int) throws {
        let fx = try FaultFixture()
        let cache = try FaultServer(host: "127.0.0.1")
        var digests: [String: String] = [:]
        for index in 0..<4 {
            let path = "set/f\(index).bin"
            let bytes = fx.serve(path, size: 40_000 + index, seed: UInt64(300 + index))
            cache.serve("/" + path, bytes: bytes, fault: .status(code: status, times: .max, retryAfter: "1500"))
            digests[path] = TestData.sha256(of: bytes)
        }

        let result = try fx.sync(["--prefer", cache.baseURL, "--deadline", "30s"], timeout: 120)

        #expect(result.exitCode == 0, "\(result)")
        for (path, digest) in digests { #expect(fx.digest(path) == digest, "\(path)") }
        let refused = cache.waitForRequests(count: 4)
        #expect(refused.map(\.path).sorted() == digests.keys.map { "/" + $0 }.sorted(), "each file asked once of the cache: \(refused)")
        #expect(refused.allSatisfy { $0.status == status }, "\(refused)")
        let fetched = fx.server.waitForRequests(count: 4)
        #expect(fetched.map(\.path).sorted() == digests.keys.map { "/" + $0 }.sorted() && fetched.allSatisfy { $0.status == 200 },
                "every file from the origin: \(fetched)")
    }
}
