import Testing
@testable import MirrorCore

@Suite struct NetrcTests {
    @Test func entriesByHostWithDefaultQuotesAndMacros() throws {
        let text = """
        machine files.lab.example login alice password "p a\\"ss"
        macdef init
        cd /pub
        password not-a-password

        machine OTHER.example
          login bob
          password hunter2
        default login anon password guest
        """
        let netrc = try Netrc(path: "n", text: text)
        #expect(netrc.credentials(forHost: "files.lab.example")?.login == "alice")
        #expect(netrc.credentials(forHost: "files.lab.example")?.password == "p a\"ss")
        #expect(netrc.credentials(forHost: "other.example")?.password == "hunter2", "host names compare case-insensitively")
        #expect(netrc.credentials(forHost: "unknown.example")?.login == "anon", "default applies to other hosts")
        #expect(!netrc.description.contains("hunter2"))
    }

    @Test func aMachineWithoutPasswordGivesNothing() throws {
        let netrc = try Netrc(path: "n", text: "machine a.example login alice\n")
        #expect(netrc.credentials(forHost: "a.example") == nil)
        #expect(netrc.credentials(forHost: "b.example") == nil)
    }

    @Test func errorsNameTheLineNotTheSecret() throws {
        #expect(throws: Netrc.Failure.self) { try Netrc(path: "n", text: "login alice password topsecret\n") }
        do {
            _ = try Netrc(path: "n", text: "machine a\npassword topsecret bogus\n")
            Issue.record("accepted an unknown token")
        } catch let failure as Netrc.Failure {
            #expect(failure.description.contains("line 2"), "\(failure)")
            #expect(!failure.description.contains("topsecret"))
        }
    }

    @Test func hostNameOfURLs() {
        #expect(hostName(of: "https://u:p@Files.Example:8443/a") == "Files.Example")
        #expect(hostName(of: "http://[::1]:80/") == "::1")
        #expect(hostName(of: "http://127.0.0.1/x") == "127.0.0.1")
    }
}
