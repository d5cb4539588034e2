"""Block devices and files for `oslens io`, by role:

    target.py     what the user names (a device or a file, or one to be
                  made), the refusals of writing to one in use or holding
                  data, and the kernel's account of it (sysfs, interrupts);
    devices.py    the zram and loop devices made for a run and removed after
                  it: an owned resource (oslens.owned);
    scheduler.py  a disk's I/O scheduler set for a run and put back after
                  it: an owned resource too.

Nothing is imported here: a module that needs one role imports it alone."""
