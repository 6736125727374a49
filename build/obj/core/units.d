build/obj/core/units.o: src/core/units.c include/sluice/units.h \
 include/sluice/common.h
include/sluice/units.h:
include/sluice/common.h:
