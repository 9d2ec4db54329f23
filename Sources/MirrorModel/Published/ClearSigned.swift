/// The text of an OpenPGP cleartext-signed message (RFC 4880 §7): what Ubuntu's `InRelease` and
/// Fedora's `CHECKSUM` files are, a checksum list with its signature around it.
///
/// Only the framing is read here, never the signature: with `--keyring` the text a run uses is
/// what `gpgv` wrote as the signed data (``OpenPGPCheck``), so that nothing outside the signed
/// part can slip in; without it, this is how the list is found between the armor lines.
public enum ClearSigned {
    static let begin = Array("-----BEGIN PGP SIGNED MESSAGE-----".utf8)
    static let signature = Array("-----BEGIN PGP SIGNATURE-----".utf8)

    /// Whether `bytes` start (after blank lines) with the cleartext header.
    public static func isClearSigned(_ bytes: [UInt8]) -> Bool {
        for (line, _) in ChecksumList.Lines(bytes: bytes[...]) {
            if line.isEmpty { continue }
            return line.elementsEqual(begin)
        }
        return false
    }

    /// The signed text: after the armor headers (`Hash: SHA256`) and the empty line that ends
    /// them, up to the signature's armor, with dash-escaping undone (§7.1: a line starting with
    /// `- ` had it added). nil when the framing is broken.
    public static func text(of bytes: [UInt8]) -> [UInt8]? {
        var lines = ChecksumList.Lines(bytes: bytes[...])
        while let (line, _) = lines.next(), !line.elementsEqual(begin) {
            guard line.isEmpty else { return nil }
        }
        // Armor headers, then one empty line.
        while let (line, _) = lines.next() {
            if line.isEmpty { break }
            guard line.contains(UInt8(ascii: ":")) else { return nil }
        }
        var out: [UInt8] = []
        var first = true
        while let (line, _) = lines.next() {
            if line.elementsEqual(signature) { return out }
            if !first { out.append(UInt8(ascii: "\n")) }
            first = false
            out += line.starts(with: "- ".utf8) ? line.dropFirst(2) : line
        }
        return nil
    }
}
