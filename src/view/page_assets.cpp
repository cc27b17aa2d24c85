// The graph view page's inline CSS and JS: lazy grouped layout, SVG drawing, pan/zoom, search, minimap, self-test.
#include "src/view/page_assets.h"

namespace smelt::view::detail {

const char* const kPageStyle = R"CSS(
html,body{height:100%}
body{margin:0;font:13px system-ui,sans-serif;color:#222;display:flex;height:100vh;overflow:hidden}
#main{flex:1;display:flex;flex-direction:column;min-width:0}
#bar{padding:6px 10px;border-bottom:1px solid #ddd;background:#fafafa;display:flex;gap:8px;align-items:center;flex-wrap:wrap}
#bar h1{font-size:15px;margin:0 6px 0 0}
#bar input[type=search]{width:220px;padding:3px 6px}
#bar button{padding:2px 8px}
#stats{color:#555}
#view{flex:1;position:relative;overflow:hidden;background:#fff}
#graph{position:absolute;left:0;top:0;width:100%;height:100%;display:block}
#mini{position:absolute;right:10px;bottom:10px;border:1px solid #aab;background:#fff;box-shadow:0 1px 4px #0003;cursor:crosshair}
#panel{width:380px;border-left:1px solid #ccc;overflow:auto;padding:8px 12px;background:#fcfcfc}
#panel h2{font-size:15px;margin:4px 0}
#panel h3{font-size:13px;margin:10px 0 2px}
#panel ul{margin:2px 0 8px;padding-left:18px}
#results li{cursor:pointer;margin:1px 0}
#results li:hover{background:#eef}
.sc{color:#777;font-size:11px}
#legend ul{list-style:none;padding:0;margin:4px 0}
#legend li{margin:2px 0}
.sw{display:inline-block;width:14px;height:14px;border:1px solid #777;vertical-align:middle;margin-right:6px}
code{font-size:12px}
#errors{color:#b00;white-space:pre-wrap}
#tip{position:absolute;pointer-events:none;background:#fffff0;border:1px solid #998;padding:2px 6px;font-size:12px;max-width:520px;white-space:pre-wrap}
)CSS";

// The layout: a group that is open is laid out on its own (a layered layout of its children:
// nodes and child groups, a closed child being one box and an open one the box of its own
// layout), bottom-up, so only what is expanded costs anything. An edge between two nodes counts,
// in the innermost group holding both, as an edge between the two children holding them.
const char* const kPageScript = R"JS(
(function(){
'use strict';
var errBox=document.getElementById('errors');
function report(m){errBox.hidden=false;errBox.textContent+=m+'\n';}
window.addEventListener('error',function(e){report('error: '+e.message+' (line '+e.lineno+')');});
window.addEventListener('unhandledrejection',function(e){report('unhandled rejection: '+e.reason);});
var consoleError=console.error;
console.error=function(){report('console.error: '+Array.prototype.map.call(arguments,String).join(' '));return consoleError.apply(console,arguments);};
var T0=performance.now();
var V=D.V,G=D.G,E=D.E,S=D.S,F=D.F,TY=D.T,nV=V.length,nG=G.length,N=nV+nG;
var NW=150,NH=38,CW=116,CH=28,GW=180,GH=54,PAD=12,HEAD=22,GX=22,GY=34,LIMIT=60,FEW=12;
var KIND=['graph input','node','graph output','Constant','initializer'];
var i,g,v;
for(i=0;i<nV;i++){v=V[i];if(v.k===undefined)v.k=1;if(v.g===undefined)v.g=0;if(v.s===undefined)v.s=-1;
  if(v.f===undefined)v.f=-1;if(!v.i)v.i=[];if(!v.u)v.u=[];}
var P=new Int32Array(nG),depth=new Int32Array(nG),kids=[],members=[],firstV=new Int32Array(nG).fill(nV);
for(g=0;g<nG;g++){kids.push([]);members.push([]);P[g]=G[g][1];}
for(g=1;g<nG;g++){depth[g]=depth[P[g]]+1;kids[P[g]].push(g);}
for(i=0;i<nV;i++){members[V[i].g].push(i);for(g=V[i].g;g>=0&&firstV[g]>i;g=P[g])firstV[g]=i;}
function isConst(v){return v.k===3||v.k===4;}
function isFused(g){return G[g][2]>=0;}
// Per group: nodes, nodes per segment, break and host-folded nodes (all of its subtree).
var count=new Int32Array(nG),breaks=new Int32Array(nG),folds=new Int32Array(nG),hist=[];
for(g=0;g<nG;g++)hist.push({});
for(i=0;i<nV;i++){v=V[i];if(v.k!==1&&v.k!==3)continue;var brk=v.s>=0&&S[v.s].k==='Break';
  for(g=v.g;g>=0;g=P[g]){count[g]++;if(brk)breaks[g]++;if(v.h)folds[g]++;if(v.s>=0)hist[g][v.s]=(hist[g][v.s]||0)+1;}}
function esc(s){return String(s).replace(/[&<>"']/g,function(c){return{'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c];});}
function clip(s,n){s=String(s);return s.length>n?s.slice(0,n-1)+'\u2026':s;}
function leaf(name){var k=name.lastIndexOf('/');return k>=0&&k<name.length-1?name.slice(k+1):name;}
function groupPath(g){var p=[];for(;g>0;g=P[g])p.push(G[g][0]);return p.reverse().join(' / ');}

// ---- state and layout ----
var open=new Uint8Array(nG),showConst=false,top=new Int32Array(nG),vis=new Int32Array(nG),loc=new Int32Array(N);
var X=new Float64Array(N),Y=new Float64Array(N),W=new Float64Array(N),H=new Float64Array(N);
var itemsOf=[],drawn=[],rootW=0,rootH=0,sel=-1,shown=[];
function computeTop(){for(var g=0;g<nG;g++){var p=g?top[P[g]]:-1;top[g]=p>=0?p:(open[g]||!g?-1:g);}}
function computeVis(){vis.fill(0);for(var i=0;i<nV;i++)if(showConst||!isConst(V[i]))vis[V[i].g]++;
  for(var g=nG-1;g>0;g--)vis[P[g]]+=vis[g];}
function rep(i){var t=top[V[i].g];return t>=0?nV+t:i;}
function container(it){return it<nV?V[it].g:P[it-nV];}
function firstOf(it){return it<nV?it:firstV[it-nV];}

function layered(items,ed,lx,ly){
  var n=items.length,k,u,w;
  items.sort(function(a,b){return firstOf(a)-firstOf(b);});
  for(k=0;k<n;k++)loc[items[k]]=k;
  var succ=[],pred=[],indeg=new Int32Array(n),seen=new Set();
  for(k=0;k<n;k++){succ.push([]);pred.push([]);}
  for(k=0;k<ed.length;k+=2){u=loc[ed[k]];w=loc[ed[k+1]];var key=u*n+w;if(seen.has(key))continue;seen.add(key);
    succ[u].push(w);pred[w].push(u);indeg[w]++;}
  // Longest path from the sources (Kahn's order; on a cycle the first unplaced item is forced).
  var layer=new Int32Array(n),placed=new Uint8Array(n),queue=[],qh=0,forced=0,done=0;
  for(k=0;k<n;k++)if(!indeg[k])queue.push(k);
  while(done<n){
    if(qh<queue.length){u=queue[qh++];if(placed[u])continue;}else{while(placed[forced])forced++;u=forced;}
    placed[u]=1;done++;
    for(k=0;k<succ[u].length;k++){w=succ[u][k];if(placed[w])continue;if(layer[u]+1>layer[w])layer[w]=layer[u]+1;if(--indeg[w]===0)queue.push(w);}
  }
  // Sources sit right above their first consumer, not in a row at the top.
  for(u=0;u<n;u++){if(pred[u].length||!succ[u].length)continue;var m=1e9;
    for(k=0;k<succ[u].length;k++)m=Math.min(m,layer[succ[u][k]]);if(m-1>layer[u])layer[u]=m-1;}
  var nl=0;for(u=0;u<n;u++)nl=Math.max(nl,layer[u]+1);
  var rows=[];for(k=0;k<nl;k++)rows.push([]);for(u=0;u<n;u++)rows[layer[u]].push(u);
  var pos=new Float64Array(n);
  function place(r){for(var j=0;j<r.length;j++)pos[r[j]]=j-(r.length-1)/2;}
  rows.forEach(place);
  for(var s=0;s<4;s++){var down=s%2===0;
    for(var st=0;st<nl;st++){var r=rows[down?st:nl-1-st];if(r.length<2)continue;
      var keyed=r.map(function(x,j){var nb=down?pred[x]:succ[x],sum=0,c=0;
        for(var q=0;q<nb.length;q++){var y=nb[q];if(down?layer[y]<layer[x]:layer[y]>layer[x]){sum+=pos[y];c++;}}
        return[c?sum/c:pos[x],j,x];});
      keyed.sort(function(a,b){return a[0]-b[0]||a[1]-b[1];});
      for(var j=0;j<r.length;j++)r[j]=keyed[j][2];place(r);}}
  // x: each item as near as it fits to the mean center of its producers above; rows never overlap.
  // y: centered in its row, but a constant at the row's bottom, right above its consumer (a tall
  // group box beside it would otherwise leave it half a box higher).
  var cx=new Float64Array(n),yTop=0,minX=1e18,maxX=-1e18;
  for(var l=0;l<nl;l++){var row=rows[l],lh=0,total=-GX;
    for(k=0;k<row.length;k++){lh=Math.max(lh,H[items[row[k]]]);total+=W[items[row[k]]]+GX;}
    var right=-1e18;
    for(k=0;k<row.length;k++){u=row[k];w=W[items[u]];var sum=0,c=0;
      for(var q=0;q<pred[u].length;q++){var p=pred[u][q];if(layer[p]<l){sum+=cx[p];c++;}}
      var x=c?sum/c-w/2:(right>-1e17?right+GX:-total/2);
      if(x<right+GX)x=right+GX;cx[u]=x+w/2;right=x+w;
      lx[items[u]]=x;ly[items[u]]=yTop+(lh-H[items[u]])/(items[u]<nV&&isConst(V[items[u]])?1:2);minX=Math.min(minX,x);maxX=Math.max(maxX,x+w);}
    yTop+=lh+GY;}
  if(!n)return{w:0,h:0};
  for(k=0;k<n;k++)lx[items[k]]-=minX;
  return{w:maxX-minX,h:yTop-GY};
}

function relayout(){
  computeTop();computeVis();
  var lx=new Float64Array(N),ly=new Float64Array(N),ge=new Array(nG),seenE=new Set(),k,g,it;
  drawn=[];
  for(k=0;k<E.length;k+=2){var a=E[k],b=E[k+1];
    if(!showConst&&(isConst(V[a])||isConst(V[b])))continue;
    var ra=rep(a),rb=rep(b);if(ra===rb)continue;
    var key=ra*N+rb;if(!seenE.has(key)){seenE.add(key);drawn.push(ra,rb);}
    var x=ra,y=rb,cx=container(x),cy=container(y);
    while(cx!==cy){if(depth[cx]>=depth[cy]){x=nV+cx;cx=P[cx];}else{y=nV+cy;cy=P[cy];}}
    if(x!==y)(ge[cx]||(ge[cx]=[])).push(x,y);}
  itemsOf=new Array(nG);
  for(g=nG-1;g>=0;g--){
    if(!vis[g]||(top[g]>=0&&top[g]!==g))continue;
    if(top[g]===g){W[nV+g]=GW;H[nV+g]=GH;continue;}
    var items=[];
    for(k=0;k<kids[g].length;k++)if(vis[kids[g][k]])items.push(nV+kids[g][k]);
    for(k=0;k<members[g].length;k++){it=members[g][k];var vv=V[it];if(isConst(vv)&&!showConst)continue;
      items.push(it);W[it]=isConst(vv)?CW:NW;H[it]=isConst(vv)?CH:NH;}
    var r=layered(items,ge[g]||[],lx,ly);itemsOf[g]=items;
    if(g){W[nV+g]=Math.max(r.w+2*PAD,GW);H[nV+g]=r.h+PAD+HEAD;}else{rootW=r.w;rootH=r.h;}
  }
  X[nV]=0;Y[nV]=0;
  for(g=0;g<nG;g++){var items2=itemsOf[g];if(!items2)continue;
    var ox=g?X[nV+g]+Math.max(PAD,(W[nV+g]-2*PAD-widthOf(items2,lx))/2+PAD):0,oy=g?Y[nV+g]+HEAD:0;
    for(k=0;k<items2.length;k++){it=items2[k];X[it]=ox+lx[it];Y[it]=oy+ly[it];}}
}
function widthOf(items,lx){var m=0;for(var k=0;k<items.length;k++)m=Math.max(m,lx[items[k]]+W[items[k]]);return m;}

// ---- drawing: a canvas, only what is in view, text only where it can be read ----
var cv=document.getElementById('graph'),ctx=cv.getContext('2d'),view=document.getElementById('view'),tip=document.getElementById('tip');
var Z={s:1,x:0,y:0},DPR=window.devicePixelRatio||1,openList=[],hitSet=new Set(),hover=-1,viewW=800,viewH=600;
function fillOf(v){if(v.h)return'#d4d4d4';if(v.s>=0)return S[v.s].c;if(D.overlay&&v.k===1)return'#ffffff';
  return['#dcefd6','#e6ecf5','#f7efd2','#eeeeee','#eeeeee'][v.k];}
function isBreak(v){return v.s>=0&&S[v.s].k==='Break';}
var fanout=new Int32Array(N),FAINT=6;
function render(){shown=[];openList=[];var g,it;fanout.fill(0);for(var k=0;k<drawn.length;k+=2)fanout[drawn[k]]++;
  for(g=1;g<nG;g++){if(itemsOf[g])openList.push(g);else if(top[g]===g&&vis[g])shown.push(nV+g);}
  for(it=0;it<nV;it++){var v=V[it];if(top[v.g]===-1&&(showConst||!isConst(v)))shown.push(it);}
  markHits();buildMini();draw();
  document.getElementById('stats').textContent=D.stats+' \u00b7 showing '+shown.length+' boxes';}
function rr(x,y,w,h,r){ctx.beginPath();if(ctx.roundRect)ctx.roundRect(x,y,w,h,r);else ctx.rect(x,y,w,h);}
function sizeCanvas(){var r=view.getBoundingClientRect();viewW=r.width||800;viewH=r.height||600;
  if(cv.width!==Math.round(viewW*DPR)||cv.height!==Math.round(viewH*DPR)){cv.width=Math.round(viewW*DPR);cv.height=Math.round(viewH*DPR);}}
function draw(){sizeCanvas();var s=Z.s,x0=-Z.x/s,y0=-Z.y/s,x1=x0+viewW/s,y1=y0+viewH/s,k,it,g,w,h;
  function inView(x,y,w,h){return x<x1&&x+w>x0&&y<y1&&y+h>y0;}
  ctx.setTransform(DPR,0,0,DPR,0,0);ctx.fillStyle='#fff';ctx.fillRect(0,0,viewW,viewH);
  ctx.setTransform(DPR*s,0,0,DPR*s,DPR*Z.x,DPR*Z.y);
  var text=s>=0.3;ctx.textAlign='center';ctx.textBaseline='alphabetic';
  for(k=0;k<openList.length;k++){g=openList[k];it=nV+g;w=W[it];h=H[it];if(!inView(X[it],Y[it],w,h))continue;var fk=isFused(g);
    rr(X[it],Y[it],w,h,6);ctx.fillStyle=fk?'rgba(80,110,255,0.04)':'rgba(100,115,160,0.05)';ctx.fill();
    ctx.setLineDash(fk?[7,4]:[]);ctx.lineWidth=fk?2:1;ctx.strokeStyle=fk?'#224':'#99a';ctx.stroke();ctx.setLineDash([]);
    rr(X[it],Y[it],w,HEAD,6);ctx.fillStyle=hover===-2-g?'#cdd6ee':fk?'#dfe7ff':'#e4e8f2';ctx.fill();
    if(text){ctx.font='11px system-ui,sans-serif';ctx.textAlign='left';ctx.fillStyle='#334';
      ctx.fillText(clip('\u25be '+(fk?G[g][0]+' \u00b7 '+F[G[g][2]].t:G[g][0])+' \u00b7 '+count[g]+' nodes',Math.max(8,Math.floor(w/6.5))),X[it]+8,Y[it]+15);ctx.textAlign='center';}}
  // Edges of a value read in many places (a mask, positions) are faint: they cross whole groups.
  for(var pass=0;pass<2;pass++){ctx.beginPath();ctx.lineWidth=1.3;ctx.strokeStyle=pass?'rgba(138,143,160,0.28)':'#8a8fa0';
    for(k=0;k<drawn.length;k+=2){var a=drawn[k],b=drawn[k+1];if((fanout[a]>=FAINT)!==(pass===1))continue;var ax=X[a]+W[a]/2,ay=Y[a]+H[a],bx=X[b]+W[b]/2,by=Y[b];
      if(!inView(Math.min(ax,bx),Math.min(ay,by),Math.abs(bx-ax)+1,Math.abs(by-ay)+1))continue;var ym=(ay+by)/2;
      ctx.moveTo(ax,ay);ctx.bezierCurveTo(ax,ym,bx,ym,bx,by);}
    ctx.stroke();}
  if(hover>=0&&hover%2===0&&hover<drawn.length){var ha=drawn[hover],hb=drawn[hover+1],hy=(Y[ha]+H[ha]+Y[hb])/2;ctx.beginPath();
    ctx.moveTo(X[ha]+W[ha]/2,Y[ha]+H[ha]);ctx.bezierCurveTo(X[ha]+W[ha]/2,hy,X[hb]+W[hb]/2,hy,X[hb]+W[hb]/2,Y[hb]);ctx.lineWidth=3.5;ctx.strokeStyle='#e60';ctx.stroke();}
  for(k=0;k<shown.length;k++){it=shown[k];w=W[it];h=H[it];if(!inView(X[it],Y[it],w,h))continue;var x=X[it],y=Y[it];
    if(it>=nV){g=it-nV;var fk2=isFused(g);rr(x,y,w,h,8);ctx.fillStyle=fk2?'#e6edff':'#f1f3f8';ctx.fill();
      var segs=Object.keys(hist[g]).map(Number).sort(function(p,q){return p-q;}),sx=x+8;
      for(var j=0;j<segs.length;j++){var sw=(w-16)*hist[g][segs[j]]/count[g];ctx.fillStyle=S[segs[j]].c;ctx.fillRect(sx,y+h-11,sw,6);sx+=sw;}
      ctx.setLineDash(fk2?[7,4]:[]);stroke(it,fk2?'#224':'#667',1.5);ctx.setLineDash([]);
      if(text){ctx.fillStyle='#222';ctx.font='12px system-ui,sans-serif';ctx.fillText('\u25b8 '+clip(G[g][0],24),x+w/2,y+17);
        ctx.font='10px system-ui,sans-serif';ctx.fillStyle='#444';ctx.fillText(count[g]+' nodes'+(folds[g]?' \u00b7 '+folds[g]+' folded':''),x+w/2,y+32);
        if(breaks[g]){ctx.font='bold 12px system-ui,sans-serif';ctx.fillStyle='#c00';ctx.fillText('!',x+w-12,y+17);}}
      continue;}
    var v=V[it],c=isConst(v);rr(x,y,w,h,5);ctx.fillStyle=fillOf(v);ctx.fill();
    if(c)ctx.setLineDash([2,2]);stroke(it,isBreak(v)?'#c00':c?'#999':'#556',isBreak(v)?4:1);ctx.setLineDash([]);
    if(text){ctx.fillStyle=v.h?'#777':'#222';ctx.font=(v.h?'italic ':'')+'12px system-ui,sans-serif';
      if(c)ctx.fillText(clip(leaf(v.n),18),x+w/2,y+18);
      else{ctx.fillText(clip(v.o,22),x+w/2,y+16);ctx.font=(v.h?'italic ':'')+'10px system-ui,sans-serif';ctx.fillStyle=v.h?'#777':'#444';ctx.fillText(clip(leaf(v.n),26),x+w/2,y+30);}}}
  drawMini();}
// The outline of a box, and a ring around it when selected (blue) or a search hit (orange).
function stroke(it,color,width){ctx.strokeStyle=color;ctx.lineWidth=width;ctx.stroke();
  if(it!==sel&&!hitSet.has(it))return;ctx.setLineDash([]);rr(X[it]-5,Y[it]-5,W[it]+10,H[it]+10,9);
  ctx.strokeStyle=it===sel?'#06f':'#f90';ctx.lineWidth=3;ctx.stroke();}
/// What is under a point of the view: an item, -2-g for an open group's header, else -1.
function hitAt(mx,my){var lx=(mx-Z.x)/Z.s,ly=(my-Z.y)/Z.s,k,it;
  for(k=shown.length-1;k>=0;k--){it=shown[k];if(lx>=X[it]&&lx<=X[it]+W[it]&&ly>=Y[it]&&ly<=Y[it]+H[it])return it;}
  for(k=openList.length-1;k>=0;k--){it=nV+openList[k];if(lx>=X[it]&&lx<=X[it]+W[it]&&ly>=Y[it]&&ly<=Y[it]+HEAD)return-2-openList[k];}
  return-1;}
/// The drawn edge within 5 px of a point (its index in `drawn`), else -1.
function edgeAt(mx,my){var lx=(mx-Z.x)/Z.s,ly=(my-Z.y)/Z.s,tol=5/Z.s,best=-1,bd=tol*tol;
  for(var k=0;k<drawn.length;k+=2){var a=drawn[k],b=drawn[k+1],ax=X[a]+W[a]/2,ay=Y[a]+H[a],bx=X[b]+W[b]/2,by=Y[b];
    if(lx<Math.min(ax,bx)-tol||lx>Math.max(ax,bx)+tol||ly<Math.min(ay,by)-tol||ly>Math.max(ay,by)+tol)continue;
    for(var t=0;t<=16;t++){var u=t/16,m=1-u,ym=(ay+by)/2,px=m*m*m*ax+3*m*m*u*ax+3*m*u*u*bx+u*u*u*bx,py=m*m*m*ay+3*m*m*u*ym+3*m*u*u*ym+u*u*u*by;
      var d=(px-lx)*(px-lx)+(py-ly)*(py-ly);if(d<bd){bd=d;best=k;}}}
  return best;}
function edgeTensors(k){var a=drawn[k],b=drawn[k+1],names=[];
  for(var j=0;j<E.length;j+=2){if(rep(E[j])!==a||rep(E[j+1])!==b)continue;var from=V[E[j]],to=V[E[j+1]];
    for(var q=0;q<from.u.length;q++)if(to.i.indexOf(from.u[q])>=0&&names.indexOf(from.u[q])<0)names.push(from.u[q]);}
  return names;}

// ---- view: pan, zoom, fit ----
function box(){var r=cv.getBoundingClientRect();return{w:r.width||800,h:r.height||600,l:r.left,t:r.top};}
function applyZ(){draw();}
function fit(){var b=box(),w=Math.max(rootW,1),h=Math.max(rootH,1);Z.s=Math.min((b.w-40)/w,(b.h-40)/h,1.5);
  Z.x=(b.w-w*Z.s)/2;Z.y=(b.h-h*Z.s)/2;applyZ();}
function home(){var b=box(),w=Math.max(rootW,1),h=Math.max(rootH,1),sf=Math.min((b.w-40)/w,(b.h-40)/h,1.5),sw=Math.min(1,(b.w-40)/w);
  if(sf>=0.6*sw){fit();return;}Z.s=sw;Z.x=(b.w-w*sw)/2;Z.y=20;applyZ();}
function centerOn(it){var b=box();Z.s=Math.max(Z.s,0.8);Z.x=b.w/2-(X[it]+W[it]/2)*Z.s;Z.y=b.h/2-(Y[it]+H[it]/2)*Z.s;applyZ();}
function zoomAt(mx,my,f){var s=Math.min(4,Math.max(0.005,Z.s*f));f=s/Z.s;Z.x=mx-(mx-Z.x)*f;Z.y=my-(my-Z.y)*f;Z.s=s;applyZ();}
cv.addEventListener('wheel',function(e){e.preventDefault();var b=box();
  zoomAt(e.clientX-b.l,e.clientY-b.t,Math.exp(-e.deltaY*(e.deltaMode?0.05:0.0015)));},{passive:false});
var drag=null,moved=false;
cv.addEventListener('mousedown',function(e){if(e.button!==0)return;drag={x:e.clientX,y:e.clientY,zx:Z.x,zy:Z.y};moved=false;});
window.addEventListener('mousemove',function(e){if(!drag)return;var dx=e.clientX-drag.x,dy=e.clientY-drag.y;
  if(!moved&&Math.abs(dx)+Math.abs(dy)<4)return;moved=true;Z.x=drag.zx+dx;Z.y=drag.zy+dy;applyZ();});
window.addEventListener('mouseup',function(){drag=null;});
window.addEventListener('resize',function(){draw();});
cv.addEventListener('mousemove',function(e){if(drag)return;var b=box(),mx=e.clientX-b.l,my=e.clientY-b.t,h=hitAt(mx,my),t='';
  if(h>=0)t=h<nV?V[h].o+' '+V[h].n:groupPath(h-nV)+' (click to open)';else if(h<-1)t=groupPath(-2-h)+' (click to close)';
  else{var k=edgeAt(mx,my);if(k>=0){var names=edgeTensors(k);t=names.slice(0,12).join(', ')+(names.length>12?', \u2026 ('+names.length+')':'');h=k;}}
  cv.style.cursor=h===-1?'grab':'pointer';
  if(h!==hover){hover=h;draw();}
  if(t){tip.hidden=false;tip.textContent=t;tip.style.left=(mx+14)+'px';tip.style.top=(my+12)+'px';}else tip.hidden=true;});
cv.addEventListener('mouseleave',function(){tip.hidden=true;if(hover!==-1){hover=-1;draw();}});

// ---- minimap ----
var mini=document.getElementById('mini'),mctx=mini.getContext('2d'),mimg=document.createElement('canvas'),MS=1,MX=0,MY=0;
mimg.width=mini.width;mimg.height=mini.height;
function buildMini(){var c=mimg.getContext('2d'),w=Math.max(rootW,1),h=Math.max(rootH,1);c.fillStyle='#fff';c.fillRect(0,0,mimg.width,mimg.height);
  MS=Math.min((mimg.width-8)/w,(mimg.height-8)/h);MX=(mimg.width-w*MS)/2;MY=(mimg.height-h*MS)/2;
  for(var k=0;k<shown.length;k++){var it=shown[k];c.fillStyle=it<nV?fillOf(V[it]):(breaks[it-nV]?'#e88':'#b8bfd0');
    c.fillRect(MX+X[it]*MS,MY+Y[it]*MS,Math.max(1,W[it]*MS),Math.max(1,H[it]*MS));}}
function drawMini(){mctx.clearRect(0,0,mini.width,mini.height);mctx.drawImage(mimg,0,0);mctx.strokeStyle='#d22';mctx.lineWidth=1.5;
  mctx.strokeRect(MX+(-Z.x/Z.s)*MS,MY+(-Z.y/Z.s)*MS,viewW/Z.s*MS,viewH/Z.s*MS);}
function miniMove(e){var b=box(),lx=(e.offsetX-MX)/MS,ly=(e.offsetY-MY)/MS;Z.x=b.w/2-lx*Z.s;Z.y=b.h/2-ly*Z.s;applyZ();}
mini.addEventListener('mousedown',function(e){e.stopPropagation();miniMove(e);});
mini.addEventListener('mousemove',function(e){if(e.buttons&1)miniMove(e);});

// ---- details ----
var details=document.getElementById('details');
function names(list){if(!list||!list.length)return'<i>none</i>';return'<ul>'+list.map(function(x){
  if(!x)return'<li><i>(omitted)</i></li>';var t=TY[x]||'';return'<li><code>'+esc(x)+'</code>'+(t?' '+esc(t):'')+'</li>';}).join('')+'</ul>';}
function segText(s){var x=S[s];return'#'+s+' <b>'+x.k+'</b> (positions '+esc(x.p)+'): '+esc(x.r)+
  (x.x&&x.x.length?'<br>tensors: '+x.x.map(function(t){return'<code>'+esc(t)+'</code>'+(TY[t]?' '+esc(TY[t]):'');}).join(', '):'')+
  (x.hv&&x.hv.length?'<br>static host values: '+esc(x.hv.join(', ')):'');}
function showVertex(it){var v=V[it],h='<h2>'+esc(v.k===1||v.k===3?v.o:KIND[v.k])+'</h2><p>name: <code>'+esc(v.n)+'</code>';
  if(v.g)h+='<br>scope: '+esc(groupPath(v.g));if(v.d)h+='<br>domain: <code>'+esc(v.d)+'</code>';h+='</p>';
  h+='<b>inputs</b>'+names(v.i)+'<b>outputs</b>'+names(v.u);
  if(v.a&&v.a.length)h+='<b>attributes</b><ul>'+v.a.map(function(x){return'<li><code>'+esc(x)+'</code></li>';}).join('')+'</ul>';
  if(v.s>=0)h+='<p><b>segment</b> '+segText(v.s)+'</p>';else if(D.overlay&&v.k===1)h+='<p><b>segment</b> not run in the overlay\'s call</p>';
  if(v.f>=0)h+='<p><b>fused kernel</b> #'+v.f+' '+esc(F[v.f].t)+(F[v.f].e?'<br><code>'+esc(F[v.f].e)+'</code>':'')+'</p>';
  if(v.h)h+='<p><b>host-folded</b>: known at trace time, costs nothing at run time</p>';
  details.innerHTML=h;}
function showGroup(g){var h='<h2>'+esc(isFused(g)?'fused '+G[g][0]:G[g][0])+'</h2><p>'+esc(groupPath(g))+'<br>'+count[g]+' nodes';
  if(breaks[g])h+=', <b style="color:#c00">'+breaks[g]+' break'+(breaks[g]>1?'s':'')+'</b>';if(folds[g])h+=', '+folds[g]+' host-folded';h+='</p>';
  if(isFused(g))h+='<p>'+esc(F[G[g][2]].t)+'</p>';
  var segs=Object.keys(hist[g]).map(Number).sort(function(a,b){return a-b;});
  if(segs.length)h+='<b>segments</b><ul>'+segs.map(function(s){return'<li><span class="sw" style="background:'+S[s].c+'"></span>'+hist[g][s]+' in '+segText(s)+'</li>';}).join('')+'</ul>';
  details.innerHTML=h;}
function select(it){sel=it;draw();if(it<nV)showVertex(it);else showGroup(it-nV);}

// ---- opening and closing groups ----
function toggle(g,state){var it=nV+g,sx=X[it]*Z.s+Z.x,sy=Y[it]*Z.s+Z.y;open[g]=state;relayout();render();
  Z.x=sx-X[it]*Z.s;Z.y=sy-Y[it]*Z.s;applyZ();}
// The first screen: the scope tree opened level by level while a whole level still fits in
// LIMIT boxes, or the screen has fewer than FEW (a 40-layer model shows its 40 layers, closed).
function initialOpen(){open.fill(0);open[0]=1;for(var g=1;g<nG;g++)if(isFused(g))open[g]=1;computeVis();
  function width(g){var c=0;for(var k=0;k<kids[g].length;k++)if(vis[kids[g][k]])c++;
    for(k=0;k<members[g].length;k++)if(showConst||!isConst(V[members[g][k]]))c++;return c;}
  var shownNow=width(0),level=kids[0].filter(function(g){return!isFused(g)&&vis[g];});
  while(level.length){var add=0,k;for(k=0;k<level.length;k++)add+=width(level[k])-1;if(shownNow+add>LIMIT&&shownNow>=FEW)break;
    shownNow+=add;var next=[];for(k=0;k<level.length;k++){open[level[k]]=1;
      next=next.concat(kids[level[k]].filter(function(g){return!isFused(g)&&vis[g];}));}level=next;}}
cv.addEventListener('click',function(e){if(moved){moved=false;return;}var b=box(),h=hitAt(e.clientX-b.l,e.clientY-b.t);
  if(h>=0&&h<nV)select(h);else if(h>=nV){toggle(h-nV,1);select(h);}else if(h<-1){toggle(-2-h,0);select(nV-2-h);}});

// ---- search ----
var q=document.getElementById('q'),results=document.getElementById('results'),hits=[];
function search(text){text=text.trim().toLowerCase();var out=[];if(!text)return out;
  function m(s){return s&&s.toLowerCase().indexOf(text)>=0;}
  for(var i=0;i<nV;i++){var v=V[i];if(m(v.n)||m(v.o)||v.i.some(m)||v.u.some(m))out.push(i);}return out;}
function markHits(){hitSet=new Set();for(var k=0;k<hits.length;k++)hitSet.add(rep(hits[k]));}
function runSearch(){hits=search(q.value);markHits();draw();if(!q.value.trim()){results.innerHTML='';return;}
  var h='<p>'+hits.length+' match'+(hits.length===1?'':'es')+(hits.length>200?' (first 200 listed)':'')+'</p><ul>';
  for(var k=0;k<hits.length&&k<200;k++){var v=V[hits[k]];h+='<li data-v="'+hits[k]+'"><b>'+esc(v.k===1||v.k===3?v.o:KIND[v.k])+'</b> '+esc(leaf(v.n))+' <span class="sc">'+esc(groupPath(v.g))+'</span></li>';}
  results.innerHTML=h+'</ul>';}
function reveal(it){var v=V[it];if(isConst(v)&&!showConst){showConst=true;document.getElementById('consts').checked=true;}
  for(var g=v.g;g>0;g=P[g])open[g]=1;relayout();render();centerOn(it);select(it);}
q.addEventListener('input',runSearch);
q.addEventListener('keydown',function(e){if(e.key==='Enter'&&hits.length)reveal(hits[0]);});
results.addEventListener('click',function(e){var li=e.target.closest?e.target.closest('li[data-v]'):null;if(li)reveal(+li.getAttribute('data-v'));});

// ---- toolbar ----
document.getElementById('fit').addEventListener('click',fit);
document.getElementById('expand').addEventListener('click',function(){open.fill(1);relayout();render();fit();});
document.getElementById('collapse').addEventListener('click',function(){open.fill(0);open[0]=1;relayout();render();fit();});
document.getElementById('consts').addEventListener('change',function(e){showConst=e.target.checked;relayout();render();});
window.addEventListener('keydown',function(e){if(e.target===q)return;if(e.key==='f')fit();else if(e.key==='/'){e.preventDefault();q.focus();}});

// ---- first drawing ----
initialOpen();
var t1=performance.now();relayout();var t2=performance.now();render();home();var t3=performance.now();
var timing='TIME load_ms='+t3.toFixed(1)+' script_ms='+(t3-T0).toFixed(1)+' layout_ms='+(t2-t1).toFixed(1)+' draw_ms='+(t3-t2).toFixed(1)+' boxes='+shown.length+' vertices='+nV+' groups='+nG;
var params=new URLSearchParams(location.search);
if(params.get('find')){q.value=params.get('find');runSearch();if(hits.length)reveal(hits[0]);}
if(params.get('zoom')){var zb=box();zoomAt(zb.w/2,zb.h/2,(+params.get('zoom')||1)/Z.s);}
if(params.has('selftest'))selftest();

// ---- self-test (?selftest): the checks a headless browser reads back from the page ----
function selftest(){var out=[timing],ok=true,k;
  function check(c,m){out.push((c?'PASS ':'FAIL ')+m);if(!c)ok=false;}
  // A click where the item is on screen, as a user's would be (centering it first).
  function clickAt(lx,ly){var b=box();cv.dispatchEvent(new MouseEvent('click',{bubbles:true,cancelable:true,clientX:b.l+lx*Z.s+Z.x,clientY:b.t+ly*Z.s+Z.y}));}
  function pixel(lx,ly){var d=ctx.getImageData(Math.round((lx*Z.s+Z.x)*DPR),Math.round((ly*Z.s+Z.y)*DPR),1,1).data;return[d[0],d[1],d[2]];}
  check(!errBox.textContent,'no errors while loading');
  check(shown.length>0,'the graph is laid out ('+shown.length+' boxes)');
  var closed=-1;for(k=0;k<shown.length;k++)if(shown[k]>=nV&&(closed<0||count[shown[k]-nV]>count[closed]))closed=shown[k]-nV;
  if(closed<0)out.push('SKIP no closed group to open');
  else{var g=closed,it=nV+g,before=shown.length;centerOn(it);
    var px=pixel(X[it]+W[it]/2,Y[it]+H[it]/2+4);check(px.join()!=='255,255,255','the closed group is painted ('+px+')');
    clickAt(X[it]+W[it]/2,Y[it]+H[it]/2);
    check(open[g]===1&&openList.indexOf(g)>=0,'group '+groupPath(g)+' opens on click');
    var inside=shown.filter(function(x){return container(x)===g;}).length;
    check(shown.indexOf(it)<0&&inside>0,'the open group shows its '+inside+' children in its place ('+before+' -> '+shown.length+' boxes)');
    clickAt(X[it]+30,Y[it]+HEAD/2);check(open[g]===0&&shown.indexOf(it)>=0,'it closes on a click on its header');}
  var nodes=[];for(k=0;k<nV;k++)if(V[k].k===1)nodes.push(k);
  if(nodes.length){var target=nodes[Math.floor(nodes.length/2)],tv=V[target];
    q.value=tv.n;q.dispatchEvent(new Event('input'));check(hits.indexOf(target)>=0,'search by node name finds '+tv.n);
    var li=results.querySelector('li[data-v="'+target+'"]');check(li!==null,'the node is listed in the results');
    if(li){li.dispatchEvent(new MouseEvent('click',{bubbles:true}));check(sel===target&&shown.indexOf(target)>=0,'clicking the result opens its groups and selects it');
      check(details.textContent.indexOf(tv.n)>=0,'its details are shown');
      var c=pixel(X[target]+W[target]/2,Y[target]+H[target]-4);check(c.join()!=='255,255,255','the node is painted where it is laid out ('+c+')');
      sel=-1;clickAt(X[target]+W[target]/2,Y[target]+H[target]/2);check(sel===target,'a click on the node selects it');}
    q.value=tv.o;q.dispatchEvent(new Event('input'));check(hits.indexOf(target)>=0,'search by op type finds it ('+hits.length+' matches)');
    if(tv.u.length&&tv.u[0]){q.value=tv.u[0];q.dispatchEvent(new Event('input'));check(hits.indexOf(target)>=0,'search by tensor name finds it');}
    q.value='';q.dispatchEvent(new Event('input'));}
  var s0=Z.s;cv.dispatchEvent(new WheelEvent('wheel',{deltaY:-200,clientX:100,clientY:100,bubbles:true,cancelable:true}));check(Z.s>s0,'the wheel zooms in');
  fit();check(Z.s>0&&isFinite(Z.x)&&isFinite(Z.y),'fit');
  var ta=performance.now();open.fill(1);relayout();var tb=performance.now();render();fit();var tc=performance.now();Z.s=1;draw();var td=performance.now();
  out.push('TIME expand_all boxes='+shown.length+' edges='+(drawn.length/2)+' layout_ms='+(tb-ta).toFixed(1)+' draw_fit_ms='+(tc-tb).toFixed(1)+' draw_1to1_ms='+(td-tc).toFixed(1));
  var consts=0;for(k=0;k<nV;k++)if(isConst(V[k]))consts++;
  check(shown.length===nV-consts,'expanding everything shows every vertex but the constants');
  // Hovering an edge names its tensors.
  var e=-1;for(k=0;k<drawn.length&&e<0;k+=2)if(drawn[k]<nV&&drawn[k+1]<nV&&V[drawn[k]].k===1&&V[drawn[k+1]].k===1)e=k;
  if(e>=0){var ea=drawn[e],eb=drawn[e+1];centerOn(ea);var b=box(),mx=(X[ea]+W[ea]/2+X[eb]+W[eb]/2)/2,my=(Y[ea]+H[ea]+Y[eb])/2;
    cv.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,clientX:b.l+mx*Z.s+Z.x,clientY:b.t+my*Z.s+Z.y}));
    var named=hover>=0&&hover%2===0&&edgeTensors(hover);
    check(!tip.hidden&&named&&named.length>0&&tip.textContent===named.join(', ').slice(0,tip.textContent.length),
      'hovering an edge names its tensors ('+tip.textContent.slice(0,60)+')');
    cv.dispatchEvent(new MouseEvent('mouseleave'));}
  // The constants toggle draws Constant nodes and initializers, each right above a consumer.
  if(consts){var box2=document.getElementById('consts');box2.checked=true;box2.dispatchEvent(new Event('change'));
    check(shown.length===nV,'the constants toggle shows every vertex ('+shown.length+' of '+nV+')');
    var placed=0,near=0;for(k=0;k<E.length;k+=2){var c=E[k],u=E[k+1];if(!isConst(V[c])||V[c].g!==V[u].g)continue;placed++;
      var gap=Y[u]-(Y[c]+H[c]);if(gap>0&&gap<=GY+NH)near++;}
    check(placed>0&&near*10>=placed*9,'constants sit right above a consumer ('+near+' of '+placed+' edges span one layer)');
    box2.checked=false;box2.dispatchEvent(new Event('change'));}
  // The minimap moves the view.
  var zx=Z.x,zy=Z.y,mr=mini.getBoundingClientRect();
  mini.dispatchEvent(new MouseEvent('mousedown',{bubbles:true,clientX:mr.left+MX+2,clientY:mr.top+MY+2}));
  check(Z.x!==zx||Z.y!==zy,'a click on the minimap moves the view');
  initialOpen();relayout();render();home();
  check(!errBox.textContent,'no errors during the self-test');
  out.unshift(ok?'SELFTEST PASS':'SELFTEST FAIL');var st=document.getElementById('selftest');st.hidden=false;st.textContent=out.join('\n');}
})();
)JS";

}  // namespace smelt::view::detail
