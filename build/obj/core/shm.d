build/obj/core/shm.o: src/core/shm.c include/sluice/shm.h \
 include/sluice/config.h include/sluice/shm-t.h include/sluice/clock.h \
 include/sluice/common.h
include/sluice/shm.h:
include/sluice/config.h:
include/sluice/shm-t.h:
include/sluice/clock.h:
include/sluice/common.h:
