// The umbrella header: everything a smelt user needs.
#pragma once

#include "smelt/array.h"
#include "smelt/attention.h"
#include "smelt/compare.h"
#include "smelt/device.h"
#include "smelt/dtype.h"
#include "smelt/errors.h"
#include "smelt/io.h"
#include "smelt/memory.h"

#include "smelt/ops.h"
#include "smelt/print.h"
#include "smelt/random.h"
#include "smelt/stream.h"
