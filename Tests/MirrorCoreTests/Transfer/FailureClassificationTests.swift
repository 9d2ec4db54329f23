import CCurl
import Testing
@testable import MirrorCore

/// `Download.classify`: which libcurl results make a host unreachable (the runner then stops
/// sending it connections) and which are worth another try.
@Suite struct FailureClassificationTests {
    @Test func aConnectThatNeverCompletedIsUnreachable() {
        #expect(Download.classify(CURLE_OPERATION_TIMEDOUT, connected: false, message: "m") == .unreachable("m"))
        #expect(Download.classify(CURLE_COULDNT_CONNECT, connected: false, message: "m") == .unreachable("m"))
        #expect(Download.classify(CURLE_COULDNT_RESOLVE_HOST, connected: false, message: "m") == .unreachable("m"))
    }

    @Test func aTimeoutAfterTheConnectIsTransient() {
        let failure = Download.classify(CURLE_OPERATION_TIMEDOUT, connected: true, message: "too slow")
        #expect(failure == .network(code: Int32(CURLE_OPERATION_TIMEDOUT.rawValue), message: "too slow", transient: true))
    }

    @Test func aCallbackAbortIsACancellation() {
        #expect(Download.classify(CURLE_ABORTED_BY_CALLBACK, connected: true, message: "m") == .cancelled)
    }
}
