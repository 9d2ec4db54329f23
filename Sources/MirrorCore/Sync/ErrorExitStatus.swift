import MirrorModel

/// The exit code of each error that can end a command (``ExitCoded``), in one place, as the
/// table of docs/cli.md lists them. ``SystemError`` is not here: the same failed system call is
/// "cannot read" (1) for `status` and "cannot write" (73) for `manifest sign`, so each command
/// gives it the code of what it was doing.

extension ManifestError: ExitCoded {
    /// A manifest file that cannot be read at all: 66 (`EX_NOINPUT`, a wrong path in a cron line
    /// or a conf); one that was read and breaks a rule: 65 (`EX_DATAERR`).
    public var exitStatus: Int32 { cannotRead ? ExitStatus.manifestUnreadable : ExitStatus.invalidManifest }
}

extension SignatureError: ExitCoded {
    /// A signature that does not verify makes the manifest unusable, as an invalid one: 65.
    public var exitStatus: Int32 { ExitStatus.invalidManifest }
}

extension SignatureKeyError: ExitCoded {
    /// The key file is named on the command line (`--trust`, `--key`): a usage error, 64.
    public var exitStatus: Int32 { ExitStatus.usage }
}

extension OpenPGPError: ExitCoded {
    /// A checksum list or Metalink file whose OpenPGP signature does not vouch for it: 65, as a
    /// manifest whose Ed25519 signature fails.
    public var exitStatus: Int32 { ExitStatus.invalidManifest }
}

extension KeyringError: ExitCoded {
    /// `--keyring` names a file gpgv cannot use, or gpgv is missing: a usage error, 64.
    public var exitStatus: Int32 { ExitStatus.usage }
}

extension PublishedListError: ExitCoded {
    /// 75 when the server may tell the sizes later (no answer, 5xx); 65 otherwise.
    var exitStatus: Int32 { isTransient ? ExitStatus.tryLater : ExitStatus.invalidManifest }
}

extension ManifestWriterError: ExitCoded {
    /// 64 when the command line is wrong (`--base-url`, `-o`); 1 when DIR or a file in it
    /// cannot be read.
    public var exitStatus: Int32 { isUsage ? ExitStatus.usage : ExitStatus.entriesFailed }
}

extension SyncError: ExitCoded {
    public var exitStatus: Int32 {
        switch self {
        case .manifest(let error): return error.exitStatus
        case .manifestRefused: return ExitStatus.invalidManifest
        case .noDestination: return ExitStatus.usage
        case .destination, .noSpace: return ExitStatus.cannotWrite
        case .locked: return ExitStatus.tryLater
        case .setup, .conversionRefused, .conversionOfNested: return ExitStatus.entriesFailed
        }
    }
}

extension RemoteManifest.Failure: ExitCoded {
    /// An unreachable server or an interrupted fetch is worth another try later (75); a kept
    /// copy that cannot be written is the destination's fault (73); no copy to read for `status`
    /// or `verify` is a manifest that cannot be read (65, as for a path that does not exist). A
    /// server that says the manifest is not there (404, 410) is a failed run (1): trying later
    /// changes nothing until someone fixes the URL or the server (docs/cli.md, "Exit codes").
    public var exitStatus: Int32 {
        switch self {
        case .notFound: return ExitStatus.entriesFailed
        case .unreachable, .interrupted: return ExitStatus.tryLater
        case .cache: return ExitStatus.cannotWrite
        case .noKeptCopy: return ExitStatus.invalidManifest
        }
    }
}

extension SyncCommandStop: ExitCoded {
    /// Stopped by a signal before any work: nothing is lost, a rerun does it all (75).
    public var exitStatus: Int32 { ExitStatus.tryLater }
}
