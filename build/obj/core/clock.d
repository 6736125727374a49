build/obj/core/clock.o: src/core/clock.c include/sluice/clock.h \
 include/sluice/common.h
include/sluice/clock.h:
include/sluice/common.h:
