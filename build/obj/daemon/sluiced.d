build/obj/daemon/sluiced.o: src/daemon/sluiced.c include/sluice/daemon.h \
 include/sluice/config.h include/sluice/shm-t.h include/sluice/shm.h \
 include/sluice/log.h
include/sluice/daemon.h:
include/sluice/config.h:
include/sluice/shm-t.h:
include/sluice/shm.h:
include/sluice/log.h:
