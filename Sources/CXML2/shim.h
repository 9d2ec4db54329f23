#ifndef MIRROR_CXML2_SHIM_H
#define MIRROR_CXML2_SHIM_H
// libxml2's streaming reader (xmlreader.h) for Metalink files (Sources/MirrorModel/Published/Metalink.swift).
#include <libxml/xmlreader.h>
#include <libxml/xmlerror.h>
#endif
