internal import CXML2

/// Owns one libxml2 streaming reader (`xmlReaderForMemory` / `xmlFreeTextReader`) and gives its
/// nodes as Swift values, so that no libxml2 type leaves this file.
///
/// Safe by construction for input from the network: no network access (`XML_PARSE_NONET`), no
/// entity substitution and no DTD loading (neither `XML_PARSE_NOENT` nor `XML_PARSE_DTDLOAD` is
/// set), and a document type declaration met is refused as a node (``Node/doctype``); the caller
/// refuses one on the bytes first (``Metalink/parse(_:sourceName:)``), since the reader parses
/// ahead of the nodes it returns. libxml2
/// prints nothing (`XML_PARSE_NOERROR`, `XML_PARSE_NOWARNING`): its first error is kept for the
/// message (`xmlTextReaderSetStructuredErrorHandler`).
final class XMLReader {
    enum Node: Equatable {
        case start(name: String, namespace: String, attributes: [String: String], isEmpty: Bool)
        case end(name: String)
        case text(String)
        case doctype
    }

    struct Failure: Error {
        var message: String
        var line: Int?
    }

    private let reader: xmlTextReaderPtr
    /// The bytes libxml2 reads from: they must outlive the reader.
    private let buffer: UnsafeMutableBufferPointer<CChar>
    private let errors: ErrorBox

    private final class ErrorBox {
        var first: Failure?
    }

    init(bytes: [UInt8]) throws {
        guard let size = Int32(exactly: bytes.count) else { throw Failure(message: "larger than 2 GiB", line: nil) }
        buffer = .allocate(capacity: max(1, bytes.count))
        _ = buffer.initialize(from: bytes.lazy.map { CChar(bitPattern: $0) })
        let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue)
        guard let made = xmlReaderForMemory(buffer.baseAddress, size, nil, nil, options) else {
            buffer.deallocate()
            throw Failure(message: "libxml2 could not start reading (xmlReaderForMemory)", line: nil)
        }
        reader = made
        errors = ErrorBox()
        xmlTextReaderSetStructuredErrorHandler(reader, { context, error in
            guard let context, let error else { return }
            let box = Unmanaged<XMLReader.ErrorBox>.fromOpaque(context).takeUnretainedValue()
            guard box.first == nil else { return }
            let text = error.pointee.message.map { String(cString: $0) } ?? "not well-formed"
            box.first = Failure(message: text.trimmingTrailingNewlines(), line: error.pointee.line > 0 ? Int(error.pointee.line) : nil)
        }, Unmanaged.passUnretained(errors).toOpaque())
    }

    deinit {
        xmlFreeTextReader(reader)
        buffer.deallocate()
    }

    /// The line of the node last read (`xmlGetLineNo` of the reader's current node: the parser
    /// itself may be lines ahead).
    var line: Int {
        if let node = xmlTextReaderCurrentNode(reader) {
            let number = xmlGetLineNo(node)
            if number > 0 { return Int(number) }
        }
        return Int(xmlTextReaderGetParserLineNumber(reader))
    }

    /// The next node that matters (comments, processing instructions and whitespace are skipped),
    /// nil at the end of the document. Throws at the first error libxml2 reports.
    func next() throws -> Node? {
        while true {
            let result = xmlTextReaderRead(reader)
            if result < 0 || errors.first != nil {
                throw errors.first ?? Failure(message: "not well-formed XML", line: line)
            }
            if result == 0 { return nil }
            switch xmlTextReaderNodeType(reader) {
            case Int32(XML_READER_TYPE_ELEMENT.rawValue):
                let name = string(xmlTextReaderConstLocalName(reader))
                let namespace = string(xmlTextReaderConstNamespaceUri(reader))
                let isEmpty = xmlTextReaderIsEmptyElement(reader) == 1
                var attributes: [String: String] = [:]
                while xmlTextReaderMoveToNextAttribute(reader) == 1 {
                    attributes[string(xmlTextReaderConstLocalName(reader))] = string(xmlTextReaderConstValue(reader))
                }
                _ = xmlTextReaderMoveToElement(reader)
                return .start(name: name, namespace: namespace, attributes: attributes, isEmpty: isEmpty)
            case Int32(XML_READER_TYPE_END_ELEMENT.rawValue):
                return .end(name: string(xmlTextReaderConstLocalName(reader)))
            case Int32(XML_READER_TYPE_TEXT.rawValue), Int32(XML_READER_TYPE_CDATA.rawValue):
                return .text(string(xmlTextReaderConstValue(reader)))
            case Int32(XML_READER_TYPE_DOCUMENT_TYPE.rawValue), Int32(XML_READER_TYPE_ENTITY_REFERENCE.rawValue),
                 Int32(XML_READER_TYPE_ENTITY.rawValue):
                return .doctype
            default:
                continue
            }
        }
    }

    private func string(_ pointer: UnsafePointer<xmlChar>?) -> String {
        guard let pointer else { return "" }
        return String(cString: pointer)
    }
}

private extension String {
    func trimmingTrailingNewlines() -> String {
        var text = self
        while text.last == "\n" { text.removeLast() }
        return text
    }
}
