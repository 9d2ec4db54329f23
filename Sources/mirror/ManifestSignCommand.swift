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
            65 unreadable or invalid manifest; 73 the signature file cannot be written.
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
            let written = try ManifestSignature.signFile(manifestPath: file, key: signingKey, outputPath: output)
            print(Formatting.forPeople("signed \(file): \(written)"))
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
