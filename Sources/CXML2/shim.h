#ifndef MIRROR_CXML2_SHIM_H
#define MIRROR_CXML2_SHIM_H
// libxml2's streaming reader (xmlreader.h) for Metalink files (Sources/MirrorModel/Published/Metalink.swift).
//
// Debian builds libxml2 with ICU, so its encoding.h includes the system's <unicode/ucnv.h>; a
// Swift module that also imports Foundation then sees two definitions of ICU's types (the
// system's and Foundation's own _FoundationICU) and does not compile. mirror never touches the
// encoding handlers that ICU fields belong to (only opaque reader pointers and xmlError), so the
// headers are read with ICU switched off: xmlversion.h first, which defines the switch, then
// the rest, which only tests it.
#include <libxml/xmlversion.h>
#undef LIBXML_ICU_ENABLED
#include <libxml/xmlreader.h>
#include <libxml/xmlerror.h>
#endif
