#ifndef MIRROR_CZLIB_SHIM_H
#define MIRROR_CZLIB_SHIM_H
#include <zlib.h>

/* inflateInit2() is a macro in zlib.h (it passes ZLIB_VERSION and sizeof(z_stream)); Swift cannot
   call macros, so this wrapper does. windowBits 15+16 asks for a gzip wrapper (RFC 1952). */
static inline int mirror_inflate_init_gzip(z_stream *strm) {
    return inflateInit2(strm, 15 + 16);
}
#endif
