/* intel-ipsec-mb's AES-128-GCM seal (direct API, 8-byte AAD, 16-byte tag) with each of
 * its code paths forced (init_mb_mgr_sse/avx/avx2/avx512), TSC cycles per call
 * (p50 of 2001 samples of 16 calls): which of them would beat ring on a CPU
 * without AVX-512 (docs/crypto.md, "No 512-bit code"). Debian's libipsec-mb-dev:
 *   gcc -O2 bench/imb-gcm-arch.c -o /tmp/imb-gcm-arch -lIPSec_MB && /tmp/imb-gcm-arch
 * A path the CPU lacks reports an init error. */
#include <intel-ipsec-mb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>
static int cmp(const void*a,const void*b){unsigned long x=*(unsigned long*)a,y=*(unsigned long*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  const char* archs[]={"sse","avx","avx2","avx512"};
  for(int ai=0;ai<4;ai++){
    IMB_MGR*m=alloc_mb_mgr(0);
    if(ai==0)init_mb_mgr_sse(m);else if(ai==1)init_mb_mgr_avx(m);else if(ai==2)init_mb_mgr_avx2(m);else init_mb_mgr_avx512(m);
    if(imb_get_errno(m)){printf("%s: init error\n",archs[ai]);continue;}
    struct gcm_key_data kd; uint8_t key[16]={1,2,3}; IMB_AES128_GCM_PRE(m,key,&kd);
    int sizes[]={64,256,1420,8192};
    for(int si=0;si<4;si++){
      int n=sizes[si]; uint8_t*buf=aligned_alloc(64,8192+64); memset(buf,7,n);
      uint8_t iv[12]={0},aad[8]={0},tag[16]; struct gcm_context_data ctx;
      enum{R=2001}; static unsigned long t[R];
      for(int w=0;w<2000;w++) IMB_AES128_GCM_ENC(m,&kd,&ctx,buf,buf,n,iv,aad,8,tag,16);
      for(int r=0;r<R;r++){ unsigned long a=__rdtsc(); for(int k=0;k<16;k++) IMB_AES128_GCM_ENC(m,&kd,&ctx,buf,buf,n,iv,aad,8,tag,16); t[r]=(__rdtsc()-a)/16;}
      qsort(t,R,sizeof t[0],cmp);
      printf("%-6s %5d B: p50 %lu cycles (min %lu)\n",archs[ai],n,t[R/2],t[0]);
    }
  }
}
