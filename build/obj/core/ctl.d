build/obj/core/ctl.o: src/core/ctl.c include/sluice/ctl.h \
 include/sluice/common.h
include/sluice/ctl.h:
include/sluice/common.h:
