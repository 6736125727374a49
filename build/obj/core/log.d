build/obj/core/log.o: src/core/log.c include/sluice/log.h \
 include/sluice/config.h include/sluice/shm-t.h
include/sluice/log.h:
include/sluice/config.h:
include/sluice/shm-t.h:
