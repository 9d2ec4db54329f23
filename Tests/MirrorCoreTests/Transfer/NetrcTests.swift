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
        #expect(netrc.credentials(for: .machine("files.lab.example"))?.login == "alice")
        #expect(netrc.credentials(for: .machine("files.lab.example"))?.password == "p a\"ss")
        #expect(netrc.credentials(for: .machine("OTHER.example"))?.password == "hunter2", "host names compare case-insensitively")
        #expect(netrc.credentials(for: .machineOrDefault("unknown.example"))?.login == "anon", "default where the scope allows it")
        #expect(netrc.credentials(for: .machineOrDefault("other.example"))?.login == "bob", "a machine entry before default")
        #expect(netrc.credentials(for: .machine("unknown.example")) == nil, "no default where the scope does not allow it")
        #expect(netrc.credentials(for: .none) == nil)
        #expect(!netrc.description.contains("hunter2"))
    }

    @Test func aMachineWithoutPasswordGivesNothing() throws {
        let netrc = try Netrc(path: "n", text: "machine a.example login alice\n")
        #expect(netrc.credentials(for: .machineOrDefault("a.example")) == nil)
        #expect(netrc.credentials(for: .machineOrDefault("b.example")) == nil)
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
}
