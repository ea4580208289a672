// The same checks compiled as C++: the header must be usable from C++.
#include "abi_test.c"
