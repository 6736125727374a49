build/obj/shim/namemap.o: src/shim/namemap.c src/shim/shim.h \
 include/sluice/admit.h include/sluice/match.h include/sluice/shm-t.h \
 include/sluice/common.h include/sluice/shm.h include/sluice/config.h
src/shim/shim.h:
include/sluice/admit.h:
include/sluice/match.h:
include/sluice/shm-t.h:
include/sluice/common.h:
include/sluice/shm.h:
include/sluice/config.h:
