import Testing
import MirrorCore
import MirrorKit

@Suite struct FormattingTests {
    @Test func bytes() {
        #expect(Formatting.bytes(0) == "0 B")
        #expect(Formatting.bytes(1023) == "1023 B")
        #expect(Formatting.bytes(734_003_200) == "700.0 MiB")
    }

    @Test func credentialsAreMasked() {
        #expect(redactedURL("https://user:s3cret@host.example/a/b") == "https://***@host.example/a/b")
        #expect(redactedURL("https://host.example/a@b") == "https://host.example/a@b")
        #expect(redactedURL("http://127.0.0.1:8080/x") == "http://127.0.0.1:8080/x")
    }
}
