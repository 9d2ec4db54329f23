#ifndef MIRROR_BUILD_INFO_H
#define MIRROR_BUILD_INFO_H

/* The commit a binary was built from, for `mirror --version`. scripts/package passes it as
   `swift build -Xcc -DMIRROR_BUILD_COMMIT='"abc123def456"'`: SwiftPM has no way to give Swift code
   a string at build time (`-Xswiftc -D` only sets a condition), but `-Xcc` defines reach the C
   headers that Swift imports, and a static inline function is compiled into the module that calls
   it. Only the `mirror` executable imports this module. A plain `swift build` defines nothing and
   the commit is empty. */
static inline const char *mirror_build_commit(void) {
#ifdef MIRROR_BUILD_COMMIT
    return MIRROR_BUILD_COMMIT;
#else
    return "";
#endif
}

#endif
