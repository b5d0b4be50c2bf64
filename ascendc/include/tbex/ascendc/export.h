#pragma once
/** Symbols of libtbex_ascendc.so that user code calls (everything else in it stays hidden). */
#if defined(TBEX_ASCENDC_BUILDING)
#define TBEX_ASCENDC_API __attribute__((visibility("default")))
#else
#define TBEX_ASCENDC_API
#endif
