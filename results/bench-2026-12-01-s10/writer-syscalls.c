#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  int variant=atoi(argv[1]); const char*root=argv[2]; char buf[4096]; memset(buf,7,4096);
  mkdir(root,0755); int rfd=open(root,O_DIRECTORY|O_RDONLY);
  int dfd[256]; char nm[64], tmp[96], pp[64];
  for(int d=0;d<256;d++){snprintf(nm,64,"d%03d",d);mkdirat(rfd,nm,0755);dfd[d]=openat(rfd,nm,O_DIRECTORY|O_RDONLY|O_NOFOLLOW);}
  double t0=now();
  for(int i=0;i<65536;i++){int d=i/256; snprintf(nm,64,"f%05d",i);
    if(variant==0){int fd=openat(dfd[d],nm,O_WRONLY|O_CREAT|O_TRUNC,0644);write(fd,buf,4096);close(fd);}
    else if(variant==1){snprintf(tmp,96,".shoal-tmp.12345.0123456789abcdef.%d",i);int fd=openat(dfd[d],tmp,O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC,0644);write(fd,buf,4096);close(fd);renameat(dfd[d],tmp,dfd[d],nm);}
    else if(variant==2){int fd=openat(dfd[d],".",O_WRONLY|O_TMPFILE|O_CLOEXEC,0644);write(fd,buf,4096);snprintf(pp,64,"/proc/self/fd/%d",fd);if(linkat(AT_FDCWD,pp,dfd[d],nm,AT_SYMLINK_FOLLOW))perror("linkat");close(fd);}
    else {int fd=openat(dfd[d],".",O_WRONLY|O_TMPFILE|O_CLOEXEC,0644);write(fd,buf,4096);if(linkat(fd,"",dfd[d],nm,AT_EMPTY_PATH))perror("linkat");close(fd);}
  }
  printf("variant %d %.3f s\n",variant,now()-t0);return 0;}
