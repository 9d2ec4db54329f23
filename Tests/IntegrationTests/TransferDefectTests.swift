import Foundation
import Testing
import MirrorCore
import MirrorTestSupport

/// Defects of the transfer layer and of placing files in DEST found by "Never a wrong file"
/// (issue 11: D2, D4, D6) and the local-attacker review (issue 17, item 3). Each test failed on
/// the build before its fix; docs/faults.md and SECURITY.md name them.
@Suite struct TransferDefectTests {
    static let mib = 1 << 20

    /// D2: a resume answered 416 with a body that never ends. The bytes keep coming, so the stall
    /// timeout never fires; only the cap on a body that is not the file's ends the response. The
    /// 416 then stands (the partial is not whole, so the next attempt asks for the whole file,
    /// which the server sends honestly).
    @Test func a416WithAnEndlessBodyIsCutAndTheFileFetchedWhole() throws {
        let fx = try FaultFixture()
        let bytes = TestData.bytes(count: 2 * Self.mib, seed: 3)
        fx.server.serve("/a.bin", bytes: bytes, fault: .stall(afterBytes: Int64(Self.mib)))
        fx.manifest.add(path: "a.bin", size: Int64(bytes.count), sha256: TestData.sha256(of: bytes))
        let run = try fx.start()
        let until = Date().addingTimeInterval(15)
        while fx.partialSize("a.bin") < Int64(Self.mib) && Date() < until && run.isRunning { usleep(5_000) }
        fx.server.serve("/a.bin", bytes: bytes, fault: .endless416)
        // Without the cap the run reads the 416's body until this timeout kills it.
        let result = try run.wait(timeout: 20)
        #expect(result.exitCode == 0, "\(result)")
        #expect(fx.digest("a.bin") == TestData.sha256(of: bytes))
        let requests = fx.requestsInOrder(count: 3)
        #expect(requests.map(\.status) == [200, 416, 200], "\(requests)")
        #expect(requests.map(\.rangeHeader) == [nil, "bytes=\(Self.mib)-", nil], "\(requests)")
    }
}
