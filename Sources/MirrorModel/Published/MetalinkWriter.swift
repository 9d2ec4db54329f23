/// A Metalink 4 file (RFC 5854) of the files `mirror manifest create` listed, written beside the
/// YAML manifest (`--metalink FILE`), so that aria2c, wget2 and other Metalink clients on the same
/// network can fetch and check the published set too (docs/manifest.md, "Metalink 4").
///
/// Each file gets its `name` (the path), `<size>`, `<hash type="sha-256">` and one `<url>`: the
/// base URL and the path percent-encoded, as the YAML manifest's default url. Text and attribute
/// values are XML-escaped (`&`, `<`, `>`, `"`, `'`); the paths the writer lists hold no control
/// characters (it skips such names), which XML 1.0 could not carry.
public enum MetalinkWriter {
    public static func render(baseURL: String, files: [ManifestWriter.FoundFile]) -> String {
        let base = baseURL.hasSuffix("/") ? baseURL : baseURL + "/"
        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metalink xmlns=\"\(Metalink.namespace)\">\n"
        for file in files {
            guard let sha256 = file.sha256 else { continue }
            let url = URLReference.resolve(URLReference.encodePath(file.path), against: base) ?? base + URLReference.encodePath(file.path)
            out += "  <file name=\"\(escaped(file.path))\">\n"
            out += "    <size>\(file.size)</size>\n"
            out += "    <hash type=\"sha-256\">\(sha256.hex)</hash>\n"
            out += "    <url priority=\"1\">\(escaped(url))</url>\n"
            out += "  </file>\n"
        }
        return out + "</metalink>\n"
    }

    static func escaped(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(character)
            }
        }
        return out
    }
}
