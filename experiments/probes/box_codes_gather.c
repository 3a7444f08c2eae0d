// Probe: is a box stored as u8 codes (a per-feature table of distinct values, looked up
// with AVX-512 gathers) faster to measure than a box of f32? Usage: D V BOXES QUERIES.
// gcc -O2 -march=native -o /tmp/gather experiments/probes/box_codes_gather.c
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
// eta of x against float box (lower, upper) D floats each
static inline float eta_f32(const float*lo,const float*hi,const float*x,int D){
  __m512 acc=_mm512_setzero_ps(); int d=0;
  for(;d+16<=D;d+=16){__m512 xv=_mm512_loadu_ps(x+d);
    acc=_mm512_add_ps(acc,_mm512_max_ps(_mm512_sub_ps(_mm512_loadu_ps(lo+d),xv),_mm512_setzero_ps()));
    acc=_mm512_add_ps(acc,_mm512_max_ps(_mm512_sub_ps(xv,_mm512_loadu_ps(hi+d)),_mm512_setzero_ps()));}
  __mmask16 m=(1u<<(D-d))-1; __m512 xv=_mm512_maskz_loadu_ps(m,x+d);
  acc=_mm512_add_ps(acc,_mm512_maskz_max_ps(m,_mm512_sub_ps(_mm512_maskz_loadu_ps(m,lo+d),xv),_mm512_setzero_ps()));
  acc=_mm512_add_ps(acc,_mm512_maskz_max_ps(m,_mm512_sub_ps(xv,_mm512_maskz_loadu_ps(m,hi+d)),_mm512_setzero_ps()));
  return _mm512_reduce_add_ps(acc);}
// coded: codes lo/hi u8, table per feature base offset off[d] (i32), values tab (f32)
static inline float eta_u8(const uint8_t*lo,const uint8_t*hi,const float*x,const int32_t*off,const float*tab,int D){
  __m512 acc=_mm512_setzero_ps(); int d=0;
  for(;d+16<=D;d+=16){__m512 xv=_mm512_loadu_ps(x+d); __m512i o=_mm512_loadu_si512(off+d);
    __m512i li=_mm512_add_epi32(o,_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(lo+d))));
    __m512i hi_=_mm512_add_epi32(o,_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(hi+d))));
    __m512 lv=_mm512_i32gather_ps(li,tab,4), hv=_mm512_i32gather_ps(hi_,tab,4);
    acc=_mm512_add_ps(acc,_mm512_max_ps(_mm512_sub_ps(lv,xv),_mm512_setzero_ps()));
    acc=_mm512_add_ps(acc,_mm512_max_ps(_mm512_sub_ps(xv,hv),_mm512_setzero_ps()));}
  if(d<D){__mmask16 m=(1u<<(D-d))-1; __m512 xv=_mm512_maskz_loadu_ps(m,x+d); __m512i o=_mm512_maskz_loadu_epi32(m,off+d);
    __m512i li=_mm512_add_epi32(o,_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m,lo+d)));
    __m512i hi_=_mm512_add_epi32(o,_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m,hi+d)));
    __m512 lv=_mm512_mask_i32gather_ps(_mm512_setzero_ps(),m,li,tab,4), hv=_mm512_mask_i32gather_ps(_mm512_setzero_ps(),m,hi_,tab,4);
    acc=_mm512_add_ps(acc,_mm512_maskz_max_ps(m,_mm512_sub_ps(lv,xv),_mm512_setzero_ps()));
    acc=_mm512_add_ps(acc,_mm512_maskz_max_ps(m,_mm512_sub_ps(xv,hv),_mm512_setzero_ps()));}
  return _mm512_reduce_add_ps(acc);}
int main(int argc,char**argv){
  int D=atoi(argv[1]); int V=atoi(argv[2]); size_t nb=atol(argv[3]); long q=atol(argv[4]);
  float*fb=aligned_alloc(64,nb*2*D*4+64); uint8_t*cb=aligned_alloc(64,nb*2*D+64);
  int32_t*off=malloc(D*4); float*tab=malloc(D*V*4);
  for(int d=0;d<D;d++){off[d]=d*V; for(int v=0;v<V;v++)tab[d*V+v]=(float)v/(V-1);}
  srand(3);
  for(size_t b=0;b<nb;b++)for(int d=0;d<D;d++){int a=rand()%V,c=rand()%V; if(a>c){int t=a;a=c;c=t;}
    cb[b*2*D+d]=a; cb[b*2*D+D+d]=c; fb[b*2*D+d]=tab[d*V+a]; fb[b*2*D+D+d]=tab[d*V+c];}
  float x[512]; for(int d=0;d<D;d++)x[d]=(float)rand()/RAND_MAX;
  uint32_t*idx=malloc(q*4); for(long i=0;i<q;i++)idx[i]=((uint64_t)rand()*rand())%nb;
  for(int rep=0;rep<2;rep++){
  double t0=now(); float s=0; for(long i=0;i<q;i++){size_t b=idx[i]; s+=eta_f32(fb+b*2*D,fb+b*2*D+D,x,D);} double t1=now();
  float s2=0; for(long i=0;i<q;i++){size_t b=idx[i]; s2+=eta_u8(cb+b*2*D,cb+b*2*D+D,x,off,tab,D);} double t2=now();
  printf("D %d V %d boxes %zu (%.0f MB f32): f32 %.1f ns/box, u8+gather %.1f ns/box  (%g %g)\n",D,V,nb,nb*2.0*D*4/1e6,(t1-t0)*1e9/q,(t2-t1)*1e9/q,s,s2);}
}
