#ifndef MIRROR_CYAML_SHIM_H
#define MIRROR_CYAML_SHIM_H
#include <yaml.h>
#endif
