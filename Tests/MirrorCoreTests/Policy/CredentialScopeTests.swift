import Testing
import MirrorCore

/// Where netrc credentials may go, decided without a server (``CredentialScope``, ``Origin``).
struct CredentialScopeTests {
    let remote = CredentialScope(manifestURL: "https://files.lab/set/set.yaml")
    let sources = ["https://files.lab/set/a.iso", "http://mirror.lab:8080/set/a.iso"]

    @Test func theManifestsOriginMayUseADefaultEntry() {
        #expect(remote.lookup(for: "https://files.lab/set/set.yaml", manifestSources: []) == .machineOrDefault("files.lab"))
        #expect(remote.lookup(for: "https://FILES.lab:443/set/a.iso", manifestSources: sources) == .machineOrDefault("files.lab"),
                "the default port and the host's case do not make another origin")
    }

    @Test func anotherOriginTheManifestNamesGetsItsMachineEntryOnly() {
        #expect(remote.lookup(for: "http://mirror.lab:8080/set/a.iso", manifestSources: sources) == .machine("mirror.lab"))
        #expect(remote.lookup(for: "http://mirror.lab:8080/set/a.iso.chunks", manifestSources: sources) == .machine("mirror.lab"),
                "origins compare, not whole URLs")
    }

    @Test func aPreferredSourceGetsNothingEvenOnTheSameHostName() {
        for preferred in ["http://files.lab/set/a.iso",            // another scheme and port
                          "https://files.lab:8443/set/a.iso",      // another port
                          "http://cache.lab:8080/set/a.iso",       // another host
                          "http://mirror.lab/set/a.iso"] {         // a named host, another port
            #expect(remote.lookup(for: preferred, manifestSources: sources) == CredentialScope.Lookup.none, "\(preferred)")
        }
    }

    @Test func aLocalManifestHasNoOriginOfItsOwn() {
        let local = CredentialScope(manifestURL: nil)
        #expect(local.lookup(for: "https://files.lab/set/a.iso", manifestSources: sources) == .machine("files.lab"))
        #expect(local.lookup(for: "https://files.lab/set/a.iso", manifestSources: []) == CredentialScope.Lookup.none)
        #expect(CredentialScope(manifestURL: "/srv/set.yaml").manifestOrigin == nil)
        #expect(CredentialScope(manifestURL: "file:///srv/set.yaml").manifestOrigin == nil)
    }

    @Test func originsOfURLs() {
        #expect(Origin("https://u:p@Files.Example:8443/a")?.description == "https://files.example:8443")
        #expect(Origin("HTTP://127.0.0.1/x")?.description == "http://127.0.0.1:80")
        #expect(Origin("http://[::1]:8080/")?.host == "::1")
        #expect(Origin("http://[::1]/")?.port == 80)
        #expect(Origin("https://h:/a")?.port == 443, "an empty port is the default one")
        for bad in ["ftp://h/", "file:///x", "http:///x", "http://h:99999/", "http://h:8a/", "http://[::1/", "no url"] {
            #expect(Origin(bad) == nil, "\(bad)")
        }
    }
}
