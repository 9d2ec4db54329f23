import ArgumentParser
import MirrorCore
import MirrorFS
import MirrorKit
import MirrorModel

/// `mirror manifest sign FILE --key KEY.pem [-o SIG]`: a detached Ed25519 signature (docs/signing.md).
struct ManifestSign: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Write a detached Ed25519 signature of a manifest, for `mirror sync --trust`.",
        discussion: """
            Signs the file's exact bytes (the compressed bytes of a .gz manifest) and writes the \
            signature as one line of base64 to FILE.sig, or to the -o path. The manifest must be \
            valid. Create a key with `openssl genpkey -algorithm ed25519 -out KEY.pem` and give \
            its public half (`openssl pkey -in KEY.pem -pubout -out PUB.pem`) to `mirror sync --trust`.

            Exit codes: 0 signed; 64 unusable key (unreadable, not PEM, encrypted, not Ed25519); \
            65 invalid manifest, or one whose expires is past; 66 manifest file cannot be read; \
            73 the signature file cannot be written.

            A manifest without expires is signed with a note: a mirror could then serve it for \
            ever and machines would never know (docs/signing.md, "Versions"); one without a \
            serial, with a note that nothing stops a mirror from serving an older one. One whose \
            expires is already past is refused: every machine syncing with --trust would refuse it.
            """
    )

    @Argument(help: "The manifest to sign (YAML, optionally gzip-compressed).")
    var file: String

    @Option(name: .long, help: ArgumentHelp("Ed25519 private key, PEM (PKCS #8, unencrypted).", valueName: "KEY.pem"))
    var key: String

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Where to write the signature (default: FILE.sig).", valueName: "SIG"))
    var output: String?

    func run() throws {
        let report = ConsoleReport(mode: .text)
        do {
            let signingKey = try SigningKey.load(path: key)
            let manifest = try ManifestLoader.load(path: file)
            if let expires = manifest.expires, expires.seconds <= Int64(currentUnixTime()) {
                throw ManifestError(file: file, message: "expires \(RFC3339.format(expires) ?? "\(expires.seconds)") is past: "
                                    + "every machine syncing with --trust would refuse it; write a later one (manifest create --expires 30d)")
            }
            let written = try ManifestSignature.signFile(manifestPath: file, key: signingKey, outputPath: output)
            print(Formatting.forPeople("signed \(file): \(written)"))
            if manifest.serial == nil {
                report.warning("note: \(file) has no serial: nothing stops a mirror from serving an older signed manifest "
                               + "(manifest create --serial N)")
            }
            if manifest.expires == nil {
                report.warning("note: \(file) has no expires: a mirror could serve it for ever and machines would not know "
                               + "(manifest create --expires 30d)")
            }
        } catch let error as ExitCoded {
            // An unusable key (64), an unreadable or invalid manifest (65).
            report.fatal(error.description)
            throw ExitCode(error.exitStatus)
        } catch let error as SystemError {
            // The manifest was read and the key loaded: what failed is writing the signature.
            report.fatal(error.description)
            throw ExitCode(ExitStatus.cannotWrite)
        }
    }
}
