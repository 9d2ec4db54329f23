import Foundation

/// Key files made by the `openssl` command in a temporary folder for one test (removed with it).
/// No private key is ever stored in the repository.
public final class TestKeys {
    public let dir: TemporaryDirectory

    public init() throws { dir = try TemporaryDirectory(prefix: "mirror-keys") }

    /// `openssl genpkey ARGUMENTS -out DIR/NAME` (e.g. `-algorithm ed25519`); returns the path.
    public func generate(_ name: String, _ arguments: [String]) throws -> String {
        let path = dir.path(name)
        try Self.openssl(["genpkey"] + arguments + ["-out", path])
        return path
    }

    /// The public half of `privatePath` (`openssl pkey -pubout`), written to DIR/NAME.
    public func publicKey(of privatePath: String, name: String) throws -> String {
        let path = dir.path(name)
        try Self.openssl(["pkey", "-in", privatePath, "-pubout", "-out", path])
        return path
    }

    /// A new Ed25519 key pair: (NAME.pem, NAME.pub.pem).
    public func generateEd25519(_ name: String) throws -> (privateKey: String, publicKey: String) {
        let priv = try generate(name + ".pem", ["-algorithm", "ed25519"])
        return (priv, try publicKey(of: priv, name: name + ".pub.pem"))
    }

    /// Runs `openssl ARGUMENTS`; throws with its output unless it exits 0.
    @discardableResult
    public static func openssl(_ arguments: [String]) throws -> ProcessResult {
        let result = try ChildProcess.run("/usr/bin/env", ["openssl"] + arguments, timeout: 60)
        guard result.exitCode == 0 else { throw HarnessError("openssl \(arguments.joined(separator: " ")) failed: \(result)") }
        return result
    }
}
