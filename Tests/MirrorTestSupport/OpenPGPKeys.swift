import Foundation

/// An OpenPGP signing key made by `gpg` in a temporary home for one test (removed with it, its
/// gpg-agent stopped), and the files a publisher makes with it: a binary keyring as distributions
/// ship (`gpg --export`), detached signatures as Ubuntu (`SHA256SUMS.gpg`, binary) and Debian
/// (`SHA256SUMS.sign`, armored) publish them, and a clearsigned file. No key is ever stored in the
/// repository.
public final class OpenPGPKeys {
    public let dir: TemporaryDirectory
    private let home: String

    /// A new Ed25519 signing key for `name`, with no passphrase; made at `createdAt` (gpg's
    /// `--faked-system-time`, `YYYYMMDDTHHMMSS`) when given, so that signatures can be dated
    /// before now and after the key.
    public init(name: String = "Lab Images <images@lab.example>", createdAt: String? = nil) throws {
        dir = try TemporaryDirectory(prefix: "mirror-gpg")
        home = dir.path("home")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        try gpg(Self.faked(createdAt) + ["--passphrase", "", "--pinentry-mode", "loopback", "--quick-gen-key", name, "ed25519", "sign", "never"])
    }

    deinit {
        _ = try? ChildProcess.run("/usr/bin/env", ["gpgconf", "--homedir", home, "--kill", "gpg-agent"], timeout: 30)
    }

    /// The public key as a binary keyring at DIR/NAME (what `--keyring` takes).
    public func exportKeyring(_ name: String = "keyring.gpg") throws -> String {
        let path = dir.path(name)
        try gpg(["--output", path, "--export"])
        return path
    }

    /// The public key ASCII-armored at DIR/NAME (what gpgv does not read).
    public func exportArmored(_ name: String = "key.asc") throws -> String {
        let path = dir.path(name)
        try gpg(["--armor", "--output", path, "--export"])
        return path
    }

    /// A detached signature of `file` at `output`: binary, or armored; made at `at`
    /// (`YYYYMMDDTHHMMSS`, UTC) when given.
    public func detachSign(_ file: String, output: String, armor: Bool = false, at: String? = nil) throws {
        try gpg(Self.faked(at) + (armor ? ["--armor"] : []) + ["--yes", "--output", output, "--detach-sign", file])
    }

    private static func faked(_ time: String?) -> [String] {
        time.map { ["--faked-system-time", $0 + "!", "--ignore-time-conflict"] } ?? []
    }

    /// `file` clearsigned at `output`.
    public func clearSign(_ file: String, output: String) throws {
        try gpg(["--yes", "--output", output, "--clearsign", file])
    }

    @discardableResult
    private func gpg(_ arguments: [String]) throws -> ProcessResult {
        let result = try ChildProcess.run("/usr/bin/env", ["gpg", "--batch", "--homedir", home] + arguments, timeout: 60)
        guard result.exitCode == 0 else { throw HarnessError("gpg \(arguments.joined(separator: " ")) failed: \(result)") }
        return result
    }
}
