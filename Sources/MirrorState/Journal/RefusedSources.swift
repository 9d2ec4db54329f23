import MirrorFS
import MirrorKit
import MirrorModel
#if canImport(Glibc)
import Glibc
#endif

/// A source whose file a run refused: it gave the same wrong digest twice, the second time asking
/// caches to revalidate, so the server itself holds other bytes than the manifest lists (a
/// publisher's wrong checksum; docs/faults.md). Every machine would otherwise fetch the whole file
/// twice on every run, and fail it again. Remembered with the server's validator for that file,
/// so the next run asks with `If-None-Match` (or `If-Modified-Since`) and downloads nothing while
/// the server answers 304; a new manifest entry, a new file on the server or another source
/// fetches as usual (docs/cli.md, "A file the server holds wrong").
public struct RefusedSource: Equatable, Sendable {
    /// The entry the bytes were refused for (path, size, digests), as the journal writes it.
    public var identity: EntryIdentity
    /// The URL, credentials masked as in the journal.
    public var url: String
    /// The server's validator for the refused file: a strong ETag, else a Last-Modified date.
    public var validator: String
    /// The digest the server's file has (lowercase hex, the entry's first algorithm).
    public var got: String
    /// When it was refused, Unix seconds.
    public var at: Int64

    public init(identity: EntryIdentity, url: String, validator: String, got: String, at: Int64) {
        self.identity = identity
        self.url = url
        self.validator = validator
        self.got = got
        self.at = at
    }

    /// The request header that asks whether the file is still the refused one: `If-None-Match`
    /// for an entity tag, else `If-Modified-Since` for a date (RFC 9110 §13.1.2, §13.1.3).
    public var conditionalHeader: String {
        validator.hasPrefix("\"") || validator.hasPrefix("W/") ? "If-None-Match: \(validator)" : "If-Modified-Since: \(validator)"
    }
}

/// `DEST/.mirror/refused`: the sources whose file was refused, by path, written whole by the run
/// that changes it (``StateFile``). Not the journal: nothing in it vouches for bytes on disk, a
/// lost or damaged file costs one more download, and a new journal record kind would make older
/// versions cut the journal there (docs/journal.md, "File format"). A line is
/// `path=… size=… sha256=… [sha512=…] url=… validator=… got=… at=…`, values percent-encoded; a
/// line that does not parse is skipped.
public enum RefusedSources {
    static let fileName = "refused"
    static let header = "mirror-refused 1"
    /// Far more than a manifest's wrong entries: a bigger file is not mirror's.
    static let maximumSize = 4 << 20

    public static func read(in state: FileDescriptor) throws -> [RefusedSource] {
        guard let text = try StateFile.read(fileName, in: state, trust: true, maximumSize: maximumSize) else { return [] }
        return parse(text)
    }

    /// Replaces the file with `refused`, or removes it when there are none.
    public static func write(_ refused: [RefusedSource], in state: FileDescriptor) throws {
        guard !refused.isEmpty else {
            if DiskChange.unlinkat(state.fd, fileName, 0) != 0 && errno != ENOENT {
                throw SystemError("remove", state.displayPath + "/" + fileName)
            }
            return
        }
        try StateFile.write(format(refused), to: fileName, in: state)
    }

    public static func format(_ refused: [RefusedSource]) -> String {
        var out = header + "\n"
        for r in refused {
            var fields = [("path", r.identity.path), ("size", String(r.identity.size))]
            for algorithm in DigestAlgorithm.allCases {
                if let hex = r.identity.digests[algorithm] { fields.append((algorithm.name, hex)) }
            }
            fields += [("url", r.url), ("validator", r.validator), ("got", r.got), ("at", String(r.at))]
            out += fields.map { "\($0.0)=\(encode($0.1))" }.joined(separator: " ") + "\n"
        }
        return out
    }

    public static func parse(_ text: String) -> [RefusedSource] {
        let lines = text.split(separator: "\n")
        guard lines.first == Substring(header) else { return [] }
        return lines.dropFirst().compactMap { line in
            var fields: [String: String] = [:]
            for pair in line.split(separator: " ") {
                guard let equals = pair.firstIndex(of: "="), let value = decode(pair[pair.index(after: equals)...]) else { return nil }
                fields[String(pair[..<equals])] = value
            }
            var digests = PerAlgorithm<String>()
            for algorithm in DigestAlgorithm.allCases { digests[algorithm] = fields[algorithm.name] }
            guard let path = fields["path"], let size = fields["size"].flatMap({ Int64($0) }), size >= 0, !digests.isEmpty,
                  let url = fields["url"], let validator = fields["validator"], !validator.isEmpty, let got = fields["got"],
                  let at = fields["at"].flatMap({ Int64($0) }) else { return nil }
            return RefusedSource(identity: EntryIdentity(path: path, size: size, digests: digests), url: url,
                                 validator: validator, got: got, at: at)
        }
    }

    /// Percent-encodes a space, `%`, `=`, and every byte outside printable ASCII.
    static func encode(_ value: String) -> String {
        var out = ""
        for byte in value.utf8 {
            if byte > 0x20 && byte < 0x7F && byte != 0x25 && byte != 0x3D {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
            }
        }
        return out
    }

    static func decode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var i = text.utf8.startIndex
        let utf8 = text.utf8
        while i < utf8.endIndex {
            let byte = utf8[i]
            if byte == 0x25 {
                let h = utf8.index(after: i)
                guard h < utf8.endIndex, utf8.index(after: h) < utf8.endIndex,
                      let value = UInt8(String(decoding: [utf8[h], utf8[utf8.index(after: h)]], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(value)
                i = utf8.index(h, offsetBy: 2)
            } else {
                bytes.append(byte)
                i = utf8.index(after: i)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
